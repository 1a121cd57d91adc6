#pragma once
// GET-fusion's partition problem in the abstract (docs/get_search.md): a DAG whose node ids are
// topological labels, a cost model of one fusion group (F_β buffer need, F_D DRAM traffic,
// supported), the capacity β, and the plan encoding (one bit per edge between fuseable nodes;
// groups = weakly connected components of the uncut edges; quotient cycles repaired by splitting
// at a topological cut). The searches, splitters and explainers work only on this; the adapter
// from a real network and its LBDF/BRR models lives with the CLI.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mapfuse::get {

struct Edge {
  int32_t from = 0, to = 0;  // from < to (topological labels)
};

// Node ids are topological labels: every edge goes from a smaller to a larger id.
struct Dag {
  int32_t n = 0;
  std::vector<Edge> edges;
  std::vector<int32_t> out_begin, out_edges;  // CSR: edge ids leaving v at out_edges[out_begin[v]..out_begin[v+1])
  std::vector<int32_t> in_begin, in_edges;

  std::span<const int32_t> out(int32_t v) const {
    return {out_edges.data() + out_begin[v], out_edges.data() + out_begin[v + 1]};
  }
  std::span<const int32_t> in(int32_t v) const {
    return {in_edges.data() + in_begin[v], in_edges.data() + in_begin[v + 1]};
  }
};

// Builds the CSR adjacency; throws InputError when an edge is out of range or not from a smaller
// to a larger id. Duplicate edges are merged.
Dag make_dag(int32_t n, std::vector<Edge> edges);

struct GroupCost {
  double buffer = 0;  // F_β, bytes
  double dram = 0;    // F_D, bytes
  bool supported = true;
};

// F_β and F_D of one fusion group, given as its node ids in increasing order.
class GroupModel {
 public:
  virtual ~GroupModel() = default;
  virtual GroupCost evaluate(std::span<const int32_t> sorted_nodes) const = 0;
  // A lower bound on F_β of every superset of the group (monotone under adding nodes), used only
  // by the exact optimum to prune; 0 (no pruning) unless the model knows one (LBDF: the weights).
  virtual double monotone_buffer_bound(std::span<const int32_t> /*sorted_nodes*/) const { return 0; }
};

// A DAG, its cost model and the buffer capacity. A node is fuseable when it is a valid group on its
// own (note §2: fuseable(v) := F_β({v}) < β); unfuseable nodes are fixed singleton groups that the
// encoding leaves out and whose DRAM is not reported.
struct Problem {
  Dag dag;
  const GroupModel* model = nullptr;
  double beta = 0;                  // bytes; a group is valid iff supported and F_β < β (strict)
  std::vector<uint8_t> fuseable;    // per node
  std::vector<int32_t> genes;       // edge ids between two fuseable nodes: the plan's bits
  std::vector<int32_t> gene_of_edge;  // per edge: its gene index, or -1
  int32_t fuseable_count = 0;
};

// Evaluates every node alone to find the fuseable ones. Throws InputError when β <= 0 or when no
// node is fuseable.
Problem make_problem(Dag dag, const GroupModel& model, double beta);

// Memoised F_β/F_D per node set (key: the node-set bitset; one table per problem, so per β).
class Evaluator {
 public:
  explicit Evaluator(const Problem& p);
  const Problem& problem() const { return *p_; }
  GroupCost cost(std::span<const int32_t> sorted_nodes);  // by value: the table may grow
  bool valid(const GroupCost& c) const { return c.supported && c.buffer < p_->beta; }
  bool valid(std::span<const int32_t> sorted_nodes) { return valid(cost(sorted_nodes)); }
  int64_t model_calls() const { return model_calls_; }
  int64_t lookups() const { return lookups_; }

 private:
  const Problem* p_;
  int32_t words_;
  std::vector<uint64_t> scratch_, keys_;
  std::vector<GroupCost> values_;
  std::vector<int32_t> slots_;  // open addressing, -1 empty
  int64_t model_calls_ = 0, lookups_ = 0;
  void grow();
};

using Group = std::vector<int32_t>;  // node ids, increasing

// A decoded plan: the fuseable groups (each weakly connected, valid after repair), their costs
// summed, and the cut bits that re-encode it (a gene is cut iff its ends are in different groups).
struct Plan {
  std::vector<uint8_t> cut;  // per gene
  std::vector<Group> groups;  // sorted by first node
  double dram = 0;  // Σ F_D over groups, bytes
  double mbu = 0;   // max F_β over groups, bytes
};

// Groups = weakly connected components of the fuseable nodes over uncut genes.
std::vector<Group> decode(const Problem& p, std::span<const uint8_t> cut);
// Cut bits of a partition of the fuseable nodes.
std::vector<uint8_t> encode(const Problem& p, const std::vector<Group>& groups);

// Scratch space for the graph walks below (reused to keep them allocation-light).
struct Workspace {
  std::vector<int32_t> mark, stack, group_of;
  int32_t epoch = 0;
  void reset(int32_t n);
};

// The weakly connected components of `nodes` (increasing ids) in the DAG's induced subgraph,
// appended to `out` each in increasing order, in order of their first node.
void components(const Dag& g, std::span<const int32_t> nodes, Workspace& ws, std::vector<Group>& out);
// Splitting at the topological cut C_t: the components of {v ≤ t} and of {v > t}.
void split_at(const Dag& g, std::span<const int32_t> nodes, int32_t t, Workspace& ws, std::vector<Group>& out);

// Breaks every cycle of the quotient graph (groups plus unfuseable singletons) by splitting a group
// of a strongly connected component at a topological cut: the group with an exit (edge to another
// group of the component) before an entry (edge from one) is cut just before its last such entry.
// Returns the number of splits made.
int32_t repair_cycles(const Problem& p, std::vector<Group>& groups, Workspace& ws);

// True iff the groups are disjoint, cover the fuseable nodes only, are weakly connected and valid,
// and the quotient graph is acyclic. `why` gets the first violation.
bool is_valid_plan(const Problem& p, Evaluator& ev, const std::vector<Group>& groups, std::string* why = nullptr);

// Σ F_D and max F_β of a partition.
void price(Evaluator& ev, Plan& plan);

}  // namespace mapfuse::get
