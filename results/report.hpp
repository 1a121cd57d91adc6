#pragma once
// Reports of a study file: summary tables (Markdown or CSV) and PNG plots.
#include <string>
#include <vector>

#include "results/hdf5_writer.hpp"

namespace mapfuse {

// Per-unit table and, for map_layer units, per (workload, architecture, seed) network totals
// (sums of layer energy and cycles, and their product).
std::string report_markdown(const StudyFile& s);
std::string report_csv(const StudyFile& s);

// Writes the plots (results/plots.py under /usr/bin/python3) into `dir`; returns the files.
// Throws std::runtime_error with the script's output when plotting fails.
std::vector<std::string> write_plots(const std::string& h5_path, const std::string& dir);

}  // namespace mapfuse
