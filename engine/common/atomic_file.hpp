#pragma once
// Replacing a file so that a reader (or a run killed half-way) sees the old file or the new one,
// never a part: write a temporary file beside it, sync it, rename it over the path, sync the
// directory. The study file, schedule files and the tile-cost cache are written this way.
#include <functional>
#include <string>
#include <string_view>

namespace mapfuse {

// The directory part of `path` ("." when it has none).
std::string directory_of(const std::string& path);

// fsync of a file (errors thrown as std::runtime_error naming it) or of a directory (best effort:
// some file systems refuse to open or sync directories).
void fsync_path(const std::string& path, bool directory);

// Calls write(tmp) with tmp = "<path>.tmp.<pid>", syncs tmp and renames it over `path`; on any
// failure tmp is removed, an older file at `path` stays untouched and the error is rethrown
// (std::runtime_error naming the path for the sync and rename).
void replace_file_atomically(const std::string& path, const std::function<void(const std::string& tmp)>& write);

// replace_file_atomically with `text` as the file's bytes.
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace mapfuse
