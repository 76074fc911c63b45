// corpus_report: the per-family and overall summary of a corpus run (fragless-bench
// corpus): for every peer its geometric-mean and worst peak/ideal, device calls, seeds
// still calling the device in the steady pass, after which repetition the calls stopped,
// host ns/op and estimated allocator time, the longest single call over the seeds (median,
// 90th percentile, worst); and for fragless, how often and by how much
// each goal of the placement work is missed, per family and per band of program size.
// Invariant: a comparison counts only seeds where both rows compared ran ok; every count
// says out of how many seeds it is.
#pragma once

#include "result_row.hpp"

#include <string>
#include <vector>

namespace fragless::bench {

struct corpus_row {
  std::string family;
  result_row row;
};

// Markdown: one table per peer figures, goals by family and by program size; "all" is the
// overall line.
std::string format_corpus_markdown(const std::vector<corpus_row>& rows, const std::vector<std::string>& families,
                                   const std::string& command_line);
// The same figures as a JSON object.
std::string format_corpus_json(const std::vector<corpus_row>& rows, const std::vector<std::string>& families,
                               const std::string& command_line);

}  // namespace fragless::bench
