#pragma once
// For results/ only (it needs the HDF5 C API): the /get_dataset table written into an open study
// file from its "get_dataset" units' rows (results/get_dataset_h5.hpp).
#include <vector>

#include "results/get_dataset_h5.hpp"
#include "results/hdf5_io.hpp"

namespace mapfuse {

// Creates /get_dataset in `file`; `rows` already in dataset order (sort_get_dataset_rows).
void write_get_dataset_group(const h5io::Context& c, hid_t file, const std::vector<GetDatasetRow>& rows);

}  // namespace mapfuse
