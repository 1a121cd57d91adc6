// `mapfuse get-train`: GET-fusion's classifier data and training (docs/get.md, "GNN classifier"):
// random groups of the training networks labelled by F_β at 128 … 2048 KB, written as CSV, then
// the GNN trained on them and saved as a model file (presets/get/gnn_<scheme>.gnn ships with mapfuse).
// `mapfuse get-train-explainer`: PGExplainer or RG-Explainer trained against that classifier on the
// invalid groups of the same data's training split (presets/get/{pg,rg}_<scheme>.gnn).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/study_units.hpp"
#include "engine/common/error.hpp"
#include "engine/search/get/gnn/dataset.hpp"
#include "engine/search/get/gnn/explainers.hpp"
#include "engine/search/get/gnn/gnn.hpp"
#include "engine/common/csv.hpp"
#include "results/get_dataset_h5.hpp"

namespace mapfuse::cli {

namespace {

// get-train --dataset: the samples of a dataset study's file (/get_dataset) or of a CSV get-train
// wrote, for `scheme`, with the networks' graphs (loaded by name) and the groups mapped back to
// node ids. The order is the file's (the study file keeps the single-process order), so training on
// it gives the same model as sampling in-process with the same seed.
struct LoadedDataset {
  std::vector<OpGraph> graphs;
  get::gnn::Dataset data;
};

LoadedDataset load_dataset_file(const std::string& path, FusionScheme scheme, const std::string& onnx_dir) {
  namespace fs = std::filesystem;
  std::vector<GetDatasetRow> rows;
  const bool csv = fs::path(path).extension() == ".csv";
  if (csv) {
    const CsvTable t = read_csv(path);
    const int net = t.column("network"), split = t.column("split"), kb = t.column("buffer_kb"),
              need = t.column("buffer_need_bytes"), sup = t.column("supported"), valid = t.column("valid"),
              group = t.column("group");
    std::vector<std::string> order;
    for (size_t i = 0; i < t.rows.size(); ++i) {
      const auto& c = t.rows[i];
      const int line = static_cast<int>(i) + 2;
      GetDatasetRow r;
      r.scheme = std::string(to_string(scheme));  // the CSV does not say; get-train names it by scheme
      r.network = c[net];
      auto at = std::find(order.begin(), order.end(), r.network);
      if (at == order.end()) order.push_back(r.network), at = order.end() - 1;
      r.network_index = static_cast<int32_t>(at - order.begin());
      r.split = c[split] == "train" ? 0 : c[split] == "validation" ? 1 : c[split] == "test" ? 2 : -1;
      if (r.split < 0)
        throw InputError({path, line, 0}, "split", "'" + c[split] + "'; expected train, validation or test");
      try {
        r.buffer_kb = std::stod(c[kb]);
        r.buffer_need_bytes = std::stod(c[need]);
      } catch (const std::exception&) {
        throw InputError({path, line, 0}, "buffer_kb", "buffer_kb and buffer_need_bytes must be numbers");
      }
      if ((c[sup] != "0" && c[sup] != "1") || (c[valid] != "0" && c[valid] != "1"))
        throw InputError({path, line, 0}, "valid", "supported and valid must be 0 or 1");
      r.supported = c[sup] == "1";
      r.valid = c[valid] == "1";
      r.group = c[group];
      rows.push_back(std::move(r));
    }
  } else {
    std::vector<GetDatasetRow> all = read_get_dataset_h5(path);
    std::set<std::string> schemes;
    for (GetDatasetRow& r : all) {
      schemes.insert(r.scheme);
      if (r.scheme == to_string(scheme)) rows.push_back(std::move(r));
    }
    if (rows.empty())
      throw InputError({path, 0, 0}, "--scheme",
                       fmt::format("the dataset holds no {} samples (it has: {}); pass --scheme {}", to_string(scheme),
                                   schemes.empty() ? "none" : fmt::format("{}", fmt::join(schemes, ", ")),
                                   schemes.empty() ? "lbdf" : *schemes.begin()));
  }
  if (rows.empty()) throw InputError({path, 0, 0}, "--dataset", "the dataset has no samples");
  LoadedDataset out;
  out.data.scheme = scheme;
  for (const GetDatasetRow& r : rows) {
    if (r.network_index < 0 || r.network_index > static_cast<int32_t>(out.data.networks.size()))
      throw InputError({path, 0, 0}, "network_index", fmt::format("rows of network '{}' out of order", r.network));
    if (r.network_index == static_cast<int32_t>(out.data.networks.size())) out.data.networks.push_back(r.network);
    else if (out.data.networks[r.network_index] != r.network)
      throw InputError({path, 0, 0}, "network", fmt::format("network {} is both '{}' and '{}'", r.network_index,
                                                            out.data.networks[r.network_index], r.network));
  }
  out.graphs = load_training_graphs(out.data.networks, onnx_dir);
  std::vector<std::map<std::string, int32_t>> ids(out.graphs.size());
  for (size_t k = 0; k < out.graphs.size(); ++k)
    for (int32_t v = 0; v < out.graphs[k].size(); ++v) ids[k][out.graphs[k].nodes[v].name] = v;
  for (size_t i = 0; i < rows.size(); ++i) {
    const GetDatasetRow& r = rows[i];
    get::gnn::LabelledGroup s;
    s.network = r.network_index;
    for (size_t from = 0; from <= r.group.size();) {
      size_t to = r.group.find(';', from);
      if (to == std::string::npos) to = r.group.size();
      const std::string name = r.group.substr(from, to - from);
      const auto it = ids[r.network_index].find(name);
      if (it == ids[r.network_index].end())
        throw InputError({path, csv ? static_cast<int>(i) + 2 : 0, 0}, "group",
                         fmt::format("'{}' is no operator of {}: the dataset was made from another graph of it",
                                     name, r.network));
      s.nodes.push_back(it->second);
      from = to + 1;
    }
    std::sort(s.nodes.begin(), s.nodes.end());
    if (s.nodes.size() < 2 || std::adjacent_find(s.nodes.begin(), s.nodes.end()) != s.nodes.end())
      throw InputError({path, csv ? static_cast<int>(i) + 2 : 0, 0}, "group",
                       "a group needs at least two distinct operators");
    if (!(r.buffer_kb > 0) || r.split < 0 || r.split > 2)
      throw InputError({path, csv ? static_cast<int>(i) + 2 : 0, 0}, "buffer_kb",
                       "buffer_kb must be positive and split 0, 1 or 2");
    s.buffer_kb = r.buffer_kb;
    s.buffer_need = r.buffer_need_bytes;
    s.supported = r.supported;
    s.valid = r.valid;
    s.split = r.split;
    out.data.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Command add_get_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("get-train",
                                 "GET-fusion: sample labelled fusion groups of the training networks and train the "
                                 "GNN validity classifier (writes <out>/get_<scheme>_dataset.csv and gnn_<scheme>.gnn)");
  struct Options {
    std::string scheme = "lbdf", out, onnx_dir, dataset;
    std::vector<std::string> networks;
    get::gnn::DatasetSpec data;
    get::gnn::TrainOptions train;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--scheme", o->scheme, "lbdf or brr")->capture_default_str();
  cmd->add_option("--out", o->out, "output directory (presets/get to rebuild the shipped models)")->required();
  cmd->add_option("--onnx-dir", o->onnx_dir, "directory of <network>.onnx (default: $MAPFUSE_SHARED_DATA/get/onnx)");
  cmd->add_option("--networks", o->networks, "training networks (default: the scheme's, docs/get.md)")->delimiter(',');
  cmd->add_option("--dataset", o->dataset,
                  "train on these samples instead of drawing them: the study file of a [[get_dataset]] study "
                  "(experiments/get_dataset.toml) or a get_<scheme>_dataset.csv get-train wrote");
  cmd->add_option("--groups", o->data.groups_per_network, "distinct groups drawn per network (0: LBDF 400, BRR 700)")->capture_default_str();
  cmd->add_option("--max-group-nodes", o->data.max_group_nodes, "largest group drawn")->capture_default_str();
  cmd->add_option("--epochs", o->train.epochs, "training epochs")->capture_default_str();
  cmd->add_option("--batch", o->train.batch, "graphs per training step")->capture_default_str();
  cmd->add_option("--lr", o->train.lr, "Adam learning rate")->capture_default_str();
  cmd->add_option("--layers", o->train.shape.layers, "GraphConv layers")->capture_default_str();
  cmd->add_option("--hidden", o->train.shape.hidden, "hidden width")->capture_default_str();
  cmd->add_option("--seed", o->data.seed, "seed of the sampling and the training")->capture_default_str();
  cmd->add_flag("--json", o->json, "print the figures as JSON");
  return {cmd, [o]() {
            namespace fs = std::filesystem;
            o->data.scheme = fusion_scheme_from_string(o->scheme);
            o->train.seed = o->data.seed;
            if (o->train.shape.layers < 1 || o->train.shape.hidden < 1)
              throw InputError({}, "--layers", "layers and hidden width must be at least 1");
            if (!o->dataset.empty() && !o->networks.empty())
              throw InputError({}, "--networks", "--dataset names its networks; drop --networks");
            if (o->networks.empty()) o->networks = get::gnn::training_networks(o->data.scheme);
            LoadedDataset loaded;
            if (!o->dataset.empty()) loaded = load_dataset_file(o->dataset, o->data.scheme, o->onnx_dir);
            else loaded.graphs = load_training_graphs(o->networks, o->onnx_dir);
            const std::vector<OpGraph>& graphs = loaded.graphs;
            std::vector<const OpGraph*> gp;
            for (const OpGraph& g : graphs) gp.push_back(&g);
            const get::gnn::Dataset d = o->dataset.empty() ? get::gnn::make_dataset(gp, o->data) : std::move(loaded.data);
            std::error_code ec;
            fs::create_directories(o->out, ec);
            const std::string stem = std::string(to_string(o->data.scheme));
            const std::string csv = (fs::path(o->out) / ("get_" + stem + "_dataset.csv")).string();
            const std::string model = (fs::path(o->out) / ("gnn_" + stem + ".gnn")).string();
            get::gnn::write_dataset_csv(d, gp, csv);
            std::vector<get::gnn::FeatureTable> tables;
            for (const OpGraph& g : graphs) tables.emplace_back(g, o->data.scheme, o->data.model);
            std::vector<get::gnn::GraphSample> split[3];
            std::vector<int64_t> groups(graphs.size()), valid(graphs.size()), samples(graphs.size());
            for (const get::gnn::LabelledGroup& s : d.samples) {
              get::gnn::GraphSample x =
                  tables[s.network].sample(s.nodes, s.buffer_kb * static_cast<double>(o->data.model.kb));
              x.label = s.valid ? 1 : 0;
              split[s.split].push_back(std::move(x));
              ++samples[s.network];
              valid[s.network] += s.valid;
            }
            get::gnn::TrainReport rep;
            const get::gnn::Classifier c = get::gnn::train_classifier(o->data.scheme, split[0], split[1], o->train, &rep);
            c.save(model);
            const get::gnn::Metrics test = c.evaluate(split[2]);
            nlohmann::json j;
            j["scheme"] = stem;
            j["dataset"] = csv;
            j["model"] = model;
            for (size_t i = 0; i < graphs.size(); ++i)
              j["networks"][graphs[i].name] = {{"groups", samples[i] / static_cast<int64_t>(o->data.buffers_kb.size())},
                                               {"samples", samples[i]},
                                               {"valid_share", samples[i] ? double(valid[i]) / double(samples[i]) : 0.0}};
            auto metrics = [](const get::gnn::Metrics& m) {
              return nlohmann::json{{"samples", m.samples}, {"accuracy", m.accuracy}, {"precision", m.precision},
                                    {"recall", m.recall}, {"f1", m.f1}};
            };
            j["train"] = metrics(rep.train);
            j["validation"] = metrics(rep.validation);
            j["test"] = metrics(test);
            j["epoch_loss"] = rep.epoch_loss;
            j["train_seconds"] = rep.seconds;
            if (o->json) {
              std::cout << j.dump(2) << "\n";
              return 0;
            }
            fmt::print("get-train {}: {} samples ({} train / {} validation / {} test)\n", stem, d.samples.size(),
                       split[0].size(), split[1].size(), split[2].size());
            for (size_t i = 0; i < graphs.size(); ++i)
              fmt::print("  {:<18} {:>6} groups {:>7} samples, {:5.1f} % valid\n", graphs[i].name,
                         samples[i] / static_cast<int64_t>(o->data.buffers_kb.size()), samples[i],
                         samples[i] ? 100.0 * double(valid[i]) / double(samples[i]) : 0.0);
            for (const auto& [name, m] : {std::pair{"train", rep.train}, {"validation", rep.validation}, {"test", test}})
              fmt::print("  {:<10} accuracy {:.4f}  F1 {:.4f}  (precision {:.4f}, recall {:.4f}; invalid = positive)\n",
                         name, m.accuracy, m.f1, m.precision, m.recall);
            fmt::print("  trained {} epochs in {:.1f} s (final loss {:.4f})\n  wrote {}\n  wrote {}\n",
                       rep.epoch_loss.size(), rep.seconds, rep.epoch_loss.back(), csv, model);
            return 0;
          }};
}

Command add_get_train_explainer_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "get-train-explainer",
      "GET-fusion: train PGExplainer or RG-Explainer against the GNN classifier on the invalid groups of "
      "get-train's training split (writes <out>/<pg|rg>_<scheme>.gnn)");
  struct Options {
    std::string scheme = "lbdf", explainer = "pg", out, onnx_dir, gnn_model;
    std::vector<std::string> networks;
    get::gnn::DatasetSpec data;
    int64_t max_groups = 0;
    int epochs = 0;
    int rollouts = 5, pretrain_list = 10, pretrain_set = 25;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--explainer", o->explainer, "pg (PGExplainer) or rg (RG-Explainer)")->capture_default_str();
  cmd->add_option("--scheme", o->scheme, "lbdf or brr")->capture_default_str();
  cmd->add_option("--out", o->out, "output directory (presets/get to rebuild the shipped models)")->required();
  cmd->add_option("--gnn-model", o->gnn_model, "the classifier to explain (default: the one built in for the scheme)");
  cmd->add_option("--onnx-dir", o->onnx_dir, "directory of <network>.onnx (default: $MAPFUSE_SHARED_DATA/get/onnx)");
  cmd->add_option("--networks", o->networks, "training networks (default: the scheme's, docs/get.md)")->delimiter(',');
  cmd->add_option("--groups", o->data.groups_per_network,
                  "distinct groups drawn per network, as get-train (0: LBDF 400, BRR 700)")
      ->capture_default_str();
  cmd->add_option("--max-groups", o->max_groups,
                  "invalid training groups used, an evenly spaced subset (0: PG 2000, RG 180)")
      ->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "training epochs (0: PG 25, RG 10, as [P])")->capture_default_str();
  cmd->add_option("--rollouts", o->rollouts,
                  "RG: Monte-Carlo rollouts per intermediate action (0: every action gets the final reward)")
      ->capture_default_str();
  cmd->add_option("--pretrain-list", o->pretrain_list, "RG: supervised \"list\" pre-training epochs of the generator")
      ->capture_default_str();
  cmd->add_option("--pretrain-set", o->pretrain_set, "RG: supervised \"set\" pre-training epochs of the generator")
      ->capture_default_str();
  cmd->add_option("--seed", o->data.seed, "seed of the sampling and the training")->capture_default_str();
  cmd->add_flag("--json", o->json, "print the figures as JSON");
  return {cmd, [o]() {
            namespace fs = std::filesystem;
            o->data.scheme = fusion_scheme_from_string(o->scheme);
            if (o->rollouts < 0 || o->pretrain_list < 0 || o->pretrain_set < 0)
              throw InputError({}, "--rollouts", "--rollouts, --pretrain-list and --pretrain-set must be at least 0");
            if (o->explainer != "pg" && o->explainer != "rg")
              throw InputError({}, "--explainer",
                               "unknown explainer '" + o->explainer + "'; expected pg or rg" +
                                   did_you_mean(o->explainer, {"pg", "rg"}));
            const bool pg = o->explainer == "pg";
            if (o->max_groups < 0 || o->epochs < 0)
              throw InputError({}, "--max-groups", "--max-groups and --epochs must be at least 0 (0: the default)");
            if (o->networks.empty()) o->networks = get::gnn::training_networks(o->data.scheme);
            const std::vector<OpGraph> graphs = load_training_graphs(o->networks, o->onnx_dir);
            std::vector<const OpGraph*> gp;
            for (const OpGraph& g : graphs) gp.push_back(&g);
            auto classifier = std::make_shared<const get::gnn::Classifier>(
                o->gnn_model.empty() ? get::gnn::Classifier::shipped(o->data.scheme)
                                     : get::gnn::Classifier::load(o->gnn_model, o->data.scheme));
            const get::gnn::Dataset d = get::gnn::make_dataset(gp, o->data);
            std::vector<get::gnn::FeatureTable> tables;
            for (const OpGraph& g : graphs) tables.emplace_back(g, o->data.scheme, o->data.model);
            std::vector<get::gnn::GroupAtBuffer> invalid;
            for (const get::gnn::LabelledGroup& s : d.samples)
              if (s.split == 0 && !s.valid)
                invalid.push_back({&tables[s.network], s.nodes, s.buffer_kb * static_cast<double>(o->data.model.kb)});
            const int64_t all = static_cast<int64_t>(invalid.size());
            const int64_t keep = o->max_groups ? o->max_groups : pg ? 2000 : 180;
            if (keep < all) {  // evenly spaced, so every network and buffer size stays represented
              std::vector<get::gnn::GroupAtBuffer> subset;
              for (int64_t k = 0; k < keep; ++k) subset.push_back(invalid[static_cast<size_t>(k * all / keep)]);
              invalid = std::move(subset);
            }
            get::gnn::ExplainerTrainReport rep;
            get::gnn::ExplainerModel model;
            if (pg) {
              get::gnn::PgTrainOptions opt;
              opt.seed = o->data.seed;
              if (o->epochs) opt.epochs = o->epochs;
              model = get::gnn::train_pg_explainer(classifier, invalid, opt, &rep);
            } else {
              get::gnn::RgTrainOptions opt;
              opt.seed = o->data.seed;
              if (o->epochs) opt.epochs = o->epochs;
              opt.n_rollouts = o->rollouts;
              opt.pretrain_list_epochs = o->pretrain_list;
              opt.pretrain_set_epochs = o->pretrain_set;
              model = get::gnn::train_rg_explainer(classifier, invalid, opt, &rep);
            }
            std::error_code ec;
            fs::create_directories(o->out, ec);
            const std::string path =
                (fs::path(o->out) / (o->explainer + "_" + std::string(to_string(o->data.scheme)) + ".gnn")).string();
            model.save(path);
            if (o->json) {
              nlohmann::json j{{"explainer", o->explainer},       {"scheme", to_string(o->data.scheme)},
                               {"model", path},                   {"invalid_groups", all},
                               {"trained_groups", rep.groups},    {"epoch_loss", rep.epoch_loss},
                               {"train_seconds", rep.seconds},    {"classifier", classifier->fingerprint()}};
              if (!pg) {
                j["pretrain_targets"] = rep.pretrain_targets;
                j["pretrain_loss"] = rep.pretrain_loss;
                j["rollouts"] = o->rollouts;
              }
              std::cout << j.dump(2) << "\n";
              return 0;
            }
            fmt::print("get-train-explainer {} {}: {} of {} invalid training groups, {} epochs in {:.1f} s\n",
                       o->explainer, to_string(o->data.scheme), rep.groups, all, rep.epoch_loss.size(), rep.seconds);
            if (!pg)
              fmt::print("  pre-training: {} targets, {} list + {} set epochs, loss (mean -log pi per action): {}\n",
                         rep.pretrain_targets, o->pretrain_list, o->pretrain_set,
                         fmt::join(rep.pretrain_loss, " "));
            fmt::print("  epoch {}: {}\n", pg ? "loss" : "mean reward", fmt::join(rep.epoch_loss, " "));
            fmt::print("  wrote {}\n", path);
            return 0;
          }};
}

}  // namespace mapfuse::cli
