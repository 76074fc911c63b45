// corpus_command: `fragless-bench corpus` (N seeds of every corpus family through every
// peer and the idealized packer, in parallel child processes) and `fragless-bench
// generate` (one corpus workload as a fragless-trace file).
// Invariant: every (family, seed, peer) requested yields exactly one row, whatever the
// replay did; the summary counts only rows that ran ok (corpus_report).
#pragma once

#include "bench_options.hpp"

#include <string>

namespace fragless::bench {

int run_corpus(const bench_options& options, const std::string& command_line);
int run_generate(const bench_options& options);

}  // namespace fragless::bench
