#pragma once
// GET-fusion's classifier data as a study's "get_dataset" units make it (docs/get.md, "Dataset
// generation as a study"): each unit labels one shard of one training network's random groups and
// carries its rows in UnitResult::data; the study file holds them all in /get_dataset, one row per
// (group, buffer size), in the order the single-process `get-train` makes them. results/ knows no
// cost model: the rows are plain values, the group given by its operators' names.
#include <cstdint>
#include <string>
#include <vector>

namespace mapfuse {

struct GetDatasetRow {
  std::string scheme;      // lbdf, brr
  std::string network;     // the training network's name
  int32_t network_index = 0;  // its place in the dataset's network order
  int32_t shard = 0;       // the unit's shard of that network's groups
  int32_t split = 0;       // 0 train, 1 validation, 2 test
  double buffer_kb = 0;
  double buffer_need_bytes = 0;  // F_β
  bool supported = true, valid = false;
  std::string group;       // operator names joined by ';'
};

// A unit's rows as one line of JSON and back; from_json throws std::runtime_error on malformed text.
std::string get_dataset_rows_to_json(const std::vector<GetDatasetRow>& rows);
std::vector<GetDatasetRow> get_dataset_rows_from_json(const std::string& text);

// Orders rows as the single-process dataset: by scheme, network_index, shard, keeping the order
// within a shard (a stable sort, so the units' arrival order does not matter).
void sort_get_dataset_rows(std::vector<GetDatasetRow>& rows);

// The /get_dataset table of a study file. Throws InputError naming the file when it cannot be read
// or has no /get_dataset (not a dataset study).
std::vector<GetDatasetRow> read_get_dataset_h5(const std::string& path);

}  // namespace mapfuse
