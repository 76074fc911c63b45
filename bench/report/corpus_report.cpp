// corpus_report: see header. Figures are computed once (family_figures) and printed by
// both formats.
#include "corpus_report.hpp"
#include "report/median.hpp"
#include "report/number_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace fragless::bench {

namespace {

const char* const focus = "fragless";
const char* const peer_order[] = {"fragless", "pytorch", "pytorch-expandable", "cudamalloc", "ideal-packer"};

struct geomean {
  double log_sum = 0;
  std::size_t count = 0;
  void add(double value) {
    if (value > 0 && std::isfinite(value)) {
      log_sum += std::log(value);
      ++count;
    }
  }
  double value() const { return count == 0 ? std::nan("") : std::exp(log_sum / static_cast<double>(count)); }
};

struct peer_figures {
  std::size_t seeds = 0, ok = 0, steady_calling = 0;
  geomean ratio, ns_per_op, first_pass_ns, steady_pass_ns;
  double worst_ratio = 0, device_calls = 0;
  // Note [Steady state]: seeds whose calls stopped, by the last repetition that made one (a
  // seed that made none counts as stopping after the first).
  std::map<int, std::size_t> settled_after;
  // Note [Steady state]: host ns/op of each repetition (the figure above is their median).
  std::vector<geomean> ns_by_pass;
  // Each seed's longest single call (Note [Host work]), for the stalls table.
  std::vector<double> longest_op_ns;
};

struct goal_figures {
  std::size_t compared_pytorch = 0, above_pytorch = 0;
  std::size_t compared_expandable = 0, above_expandable = 0;
  double worst_over_best_peer = 0;  // max of fragless peak / min(pytorch, expandable) peaks
  std::size_t packer_tight = 0, above_103_where_packer_tight = 0;
  double worst_ratio_where_packer_tight = 0;
  std::size_t calls_compared = 0, calls_above_expandable = 0;
  double fragless_calls = 0, expandable_calls = 0;
  std::size_t pytorch_steady_zero = 0, steady_calls_where_pytorch_zero = 0;
  double most_steady_calls_where_pytorch_zero = 0;
  geomean ns_ratio_to_pytorch, steady_time_ratio_to_pytorch;
  std::size_t steady_time_compared = 0, steady_time_above_pytorch = 0;
  // Note [Steady state]: what a run of k repetitions (index k - 1) would have reported, read
  // from this run's first k.
  struct shorter_run {
    std::size_t pytorch_zero = 0;  // seeds whose k-th repetition PyTorch made no call in
    std::size_t calling = 0;       // ... and fragless did
    geomean ns_ratio;              // median of the first k host times over PyTorch's
  };
  std::vector<shorter_run> shorter_runs;
};

struct family_figures {
  std::map<std::string, peer_figures> peers;
  goal_figures goals;
};

using seed_rows = std::map<std::string, const result_row*>;  // allocator -> row

double median_of_first(const std::vector<double>& values, std::size_t count) {
  return median(std::vector<double>(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(count)));
}

// Note [Steady state]: goal_figures::shorter_runs from one seed's per-repetition figures.
void add_shorter_runs(const result_row& ours, const result_row& pytorch, goal_figures& g) {
  const std::vector<double> our_calls = parse_pass_list(ours.calls_by_pass);
  const std::vector<double> their_calls = parse_pass_list(pytorch.calls_by_pass);
  const std::vector<double> our_ns = parse_pass_list(ours.host_ns_by_pass);
  const std::vector<double> their_ns = parse_pass_list(pytorch.host_ns_by_pass);
  const std::size_t passes = std::min({our_calls.size(), their_calls.size(), our_ns.size(), their_ns.size()});
  if (g.shorter_runs.size() < passes) g.shorter_runs.resize(passes);
  for (std::size_t k = 1; k <= passes; ++k) {
    goal_figures::shorter_run& run = g.shorter_runs[k - 1];
    if (their_calls[k - 1] == 0) {
      ++run.pytorch_zero;
      if (our_calls[k - 1] > 0) ++run.calling;
    }
    const double theirs = median_of_first(their_ns, k);
    if (theirs > 0) run.ns_ratio.add(median_of_first(our_ns, k) / theirs);
  }
}

family_figures compute(const std::vector<const corpus_row*>& rows) {
  family_figures f;
  std::map<std::string, seed_rows> by_seed;
  for (const corpus_row* r : rows) by_seed[r->row.trace][r->row.allocator] = &r->row;
  for (const auto& [trace, seed] : by_seed) {
    for (const auto& [allocator, row] : seed) {
      peer_figures& p = f.peers[allocator];
      ++p.seeds;
      if (!row->ok()) continue;
      ++p.ok;
      if (row->ratio_to_ideal) {
        p.ratio.add(*row->ratio_to_ideal);
        p.worst_ratio = std::max(p.worst_ratio, *row->ratio_to_ideal);
      }
      if (row->device_calls) p.device_calls += *row->device_calls;
      if (row->steady_calls && *row->steady_calls > 0) ++p.steady_calling;
      if (row->steady_calls && *row->steady_calls == 0 && row->last_calling_pass)
        ++p.settled_after[std::max(1, static_cast<int>(*row->last_calling_pass))];
      if (row->host_ns_per_op) p.ns_per_op.add(*row->host_ns_per_op);
      const std::vector<double> ns_by_pass = parse_pass_list(row->host_ns_by_pass);
      if (p.ns_by_pass.size() < ns_by_pass.size()) p.ns_by_pass.resize(ns_by_pass.size());
      for (std::size_t pass = 0; pass < ns_by_pass.size(); ++pass) p.ns_by_pass[pass].add(ns_by_pass[pass]);
      if (row->longest_op_ns) p.longest_op_ns.push_back(*row->longest_op_ns);
      if (row->estimated_first_pass_ns) p.first_pass_ns.add(*row->estimated_first_pass_ns);
      if (row->estimated_steady_pass_ns) p.steady_pass_ns.add(*row->estimated_steady_pass_ns);
    }
    auto ok_row = [&](const char* name) -> const result_row* {
      auto found = seed.find(name);
      return found != seed.end() && found->second->ok() && found->second->peak_reserved_bytes ? found->second : nullptr;
    };
    const result_row* ours = ok_row(focus);
    if (ours == nullptr) continue;
    const result_row* pytorch = ok_row("pytorch");
    const result_row* expandable = ok_row("pytorch-expandable");
    const result_row* packer = ok_row("ideal-packer");
    goal_figures& g = f.goals;
    const double peak = *ours->peak_reserved_bytes;
    double best_peer = 0;
    if (pytorch != nullptr) {
      add_shorter_runs(*ours, *pytorch, g);
      ++g.compared_pytorch;
      if (peak > *pytorch->peak_reserved_bytes) ++g.above_pytorch;
      best_peer = *pytorch->peak_reserved_bytes;
      if (ours->host_ns_per_op && pytorch->host_ns_per_op && *pytorch->host_ns_per_op > 0) {
        g.ns_ratio_to_pytorch.add(*ours->host_ns_per_op / *pytorch->host_ns_per_op);
      }
      if (pytorch->steady_calls && ours->steady_calls && *pytorch->steady_calls == 0) {
        ++g.pytorch_steady_zero;
        if (*ours->steady_calls > 0) {
          ++g.steady_calls_where_pytorch_zero;
          g.most_steady_calls_where_pytorch_zero = std::max(g.most_steady_calls_where_pytorch_zero, *ours->steady_calls);
        }
      }
      if (ours->estimated_steady_pass_ns && pytorch->estimated_steady_pass_ns) {
        ++g.steady_time_compared;
        if (*ours->estimated_steady_pass_ns > *pytorch->estimated_steady_pass_ns) ++g.steady_time_above_pytorch;
        g.steady_time_ratio_to_pytorch.add(*ours->estimated_steady_pass_ns / *pytorch->estimated_steady_pass_ns);
      }
    }
    if (expandable != nullptr) {
      ++g.compared_expandable;
      if (peak > *expandable->peak_reserved_bytes) ++g.above_expandable;
      best_peer = best_peer == 0 ? *expandable->peak_reserved_bytes : std::min(best_peer, *expandable->peak_reserved_bytes);
      if (ours->device_calls && expandable->device_calls) {
        ++g.calls_compared;
        g.fragless_calls += *ours->device_calls;
        g.expandable_calls += *expandable->device_calls;
        if (*ours->device_calls > *expandable->device_calls) ++g.calls_above_expandable;
      }
    }
    if (best_peer > 0) g.worst_over_best_peer = std::max(g.worst_over_best_peer, peak / best_peer);
    if (packer != nullptr && packer->ratio_to_ideal && *packer->ratio_to_ideal <= 1.01 && ours->ratio_to_ideal) {
      ++g.packer_tight;
      if (*ours->ratio_to_ideal > 1.03) ++g.above_103_where_packer_tight;
      g.worst_ratio_where_packer_tight = std::max(g.worst_ratio_where_packer_tight, *ours->ratio_to_ideal);
    }
  }
  return f;
}

std::string of(std::size_t part, std::size_t whole) { return std::to_string(part) + " of " + std::to_string(whole); }

std::vector<std::pair<std::string, family_figures>> all_figures(const std::vector<corpus_row>& rows,
                                                                 const std::vector<std::string>& families) {
  std::vector<std::pair<std::string, family_figures>> out;
  std::vector<const corpus_row*> everything;
  for (const std::string& family : families) {
    std::vector<const corpus_row*> mine;
    for (const corpus_row& r : rows) {
      if (r.family == family) mine.push_back(&r);
    }
    everything.insert(everything.end(), mine.begin(), mine.end());
    out.emplace_back(family, compute(mine));
  }
  out.emplace_back("all", compute(everything));
  return out;
}

// Note [Goals by program size]
// The totals of a family are the sums of its largest programs: a 32 GiB seed makes a
// hundred times the calls of a 256 MiB one. Where a goal is missed depends on size (the
// peers' units are absolute -- 2 MiB pages, expandable segments' 20 MiB -- fragless's
// chunks a fraction of what is reserved), so the goals are also given per band of
// program size, a seed's ideal (the most bytes live at once), in factors of four.
const std::size_t kSizeBandCount = 5;
const char* const kSizeBandNames[kSizeBandCount] = {"< 256 MiB", "256 MiB - 1 GiB", "1 - 4 GiB", "4 - 16 GiB",
                                                    ">= 16 GiB"};

std::size_t size_band(double ideal_bytes) {
  double upper = 256.0 * 1024 * 1024;
  std::size_t band = 0;
  while (band + 1 < kSizeBandCount && ideal_bytes >= upper) {
    ++band;
    upper *= 4;
  }
  return band;
}

// The bands that hold a seed, each with its figures; a seed without an ideal is left out.
std::vector<std::pair<std::string, family_figures>> figures_by_size(const std::vector<corpus_row>& rows) {
  std::map<std::string, double> ideal_of_trace;
  for (const corpus_row& r : rows)
    if (r.row.ideal_bytes && *r.row.ideal_bytes > 0) ideal_of_trace[r.row.trace] = *r.row.ideal_bytes;
  std::vector<std::vector<const corpus_row*>> banded(kSizeBandCount);
  for (const corpus_row& r : rows) {
    auto ideal = ideal_of_trace.find(r.row.trace);
    if (ideal != ideal_of_trace.end()) banded[size_band(ideal->second)].push_back(&r);
  }
  std::vector<std::pair<std::string, family_figures>> out;
  for (std::size_t band = 0; band < kSizeBandCount; ++band)
    if (!banded[band].empty()) out.emplace_back(kSizeBandNames[band], compute(banded[band]));
  return out;
}

// One line of the goals table per group (family or size band), after its header.
std::string goals_table(const std::string& intro, const std::string& group,
                        const std::vector<std::pair<std::string, family_figures>>& figures) {
  std::string out = "\n" + intro + "\n\n";
  out += "| " + group + " | peak > PyTorch | peak > expandable | worst peak / min(PyTorch, expandable) | > 1.03x ideal where packer <= 1.01x | device calls > expandable (seeds) | calls fragless / expandable (total) | calls in steady pass where PyTorch has 0 (most) | host ns/op / PyTorch (geomean) | est. steady time > PyTorch | est. steady time / PyTorch (geomean) |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [name, f] : figures) {
    const goal_figures& g = f.goals;
    out += "| " + name + " | " + of(g.above_pytorch, g.compared_pytorch) + " | " + of(g.above_expandable, g.compared_expandable) +
           " | " + fixed(g.worst_over_best_peer, 3) + " | " + of(g.above_103_where_packer_tight, g.packer_tight) +
           (g.packer_tight > 0 ? " (worst " + fixed(g.worst_ratio_where_packer_tight, 3) + ")" : "") + " | " +
           of(g.calls_above_expandable, g.calls_compared) + " | " +
           fixed(g.expandable_calls > 0 ? g.fragless_calls / g.expandable_calls : std::nan(""), 2) + " | " +
           of(g.steady_calls_where_pytorch_zero, g.pytorch_steady_zero) +
           (g.steady_calls_where_pytorch_zero > 0 ? " (" + fixed(g.most_steady_calls_where_pytorch_zero, 0) + ")" : "") + " | " +
           fixed(g.ns_ratio_to_pytorch.value(), 2) + " | " + of(g.steady_time_above_pytorch, g.steady_time_compared) + " | " +
           fixed(g.steady_time_ratio_to_pytorch.value(), 2) + " |\n";
  }
  return out;
}

// The goal figures as a JSON object.
std::string goals_json(const goal_figures& g) {
  auto number = [](double value) { return std::isfinite(value) ? fixed(value, 6) : std::string("null"); };
  auto field = [](const char* name, const std::string& value) { return std::string(", \"") + name + "\": " + value; };
  auto count = [](std::size_t value) { return std::to_string(value); };
  std::string out = "{\"above_pytorch\": " + count(g.above_pytorch);
  out += field("compared_pytorch", count(g.compared_pytorch));
  out += field("above_expandable", count(g.above_expandable));
  out += field("compared_expandable", count(g.compared_expandable));
  out += field("worst_over_best_peer", number(g.worst_over_best_peer));
  out += field("packer_tight", count(g.packer_tight));
  out += field("above_103_where_packer_tight", count(g.above_103_where_packer_tight));
  out += field("calls_above_expandable", count(g.calls_above_expandable));
  out += field("calls_compared", count(g.calls_compared));
  out += field("steady_calls_where_pytorch_zero", count(g.steady_calls_where_pytorch_zero));
  out += field("pytorch_steady_zero", count(g.pytorch_steady_zero));
  out += field("host_ns_ratio_to_pytorch", number(g.ns_ratio_to_pytorch.value()));
  out += field("steady_time_above_pytorch", count(g.steady_time_above_pytorch));
  out += field("steady_time_ratio_to_pytorch", number(g.steady_time_ratio_to_pytorch.value()));
  out += ", \"shorter_runs\": [";
  for (std::size_t k = 1; k <= g.shorter_runs.size(); ++k) {
    const goal_figures::shorter_run& run = g.shorter_runs[k - 1];
    out += std::string(k == 1 ? "" : ", ") + "{\"repetitions\": " + count(k);
    out += field("calling_where_pytorch_zero", count(run.calling)) + field("pytorch_zero", count(run.pytorch_zero));
    out += field("host_ns_ratio_to_pytorch", number(run.ns_ratio.value())) + "}";
  }
  return out + "]}";
}

// The peers in peer_order, with any other fragless configuration of the run (a --conf
// NAME=... of the command, "fragless[NAME]") right after fragless.
std::vector<std::string> ordered_peers(const family_figures& f) {
  std::vector<std::string> peers;
  for (const char* peer : peer_order) {
    peers.emplace_back(peer);
    if (std::string(peer) != focus) continue;
    for (const auto& entry : f.peers)
      if (entry.first.rfind(std::string(focus) + "[", 0) == 0) peers.push_back(entry.first);
  }
  return peers;
}

// A per-repetition table's opening: `intro`, then its header: family, peer and `columns`
// (numbers, right-aligned).
std::string table_header(const std::string& intro, const std::vector<std::string>& columns) {
  std::string out = "\n" + intro + "\n\n| family | peer |";
  std::string rule = "|---|---|";
  for (const std::string& column : columns) {
    out += " " + column + " |";
    rule += "---:|";
  }
  return out + "\n" + rule + "\n";
}

// "PREFIX1", "PREFIX2", ... "PREFIX<passes>".
std::vector<std::string> numbered(const std::string& prefix, std::size_t passes) {
  std::vector<std::string> columns;
  for (std::size_t pass = 1; pass <= passes; ++pass) columns.push_back(prefix + std::to_string(pass));
  return columns;
}

// Note [Steady state]: when each peer's device calls stop, per family: one column per
// repetition after which some seed's calls stopped, and the seeds still calling in the last.
std::string settling_table(const std::vector<std::pair<std::string, family_figures>>& figures) {
  int last_column = 0;
  for (const auto& [family, f] : figures)
    for (const auto& [peer, p] : f.peers)
      if (!p.settled_after.empty()) last_column = std::max(last_column, p.settled_after.rbegin()->first);
  if (last_column == 0) return "";
  std::vector<std::string> columns = numbered("after pass ", static_cast<std::size_t>(last_column));
  columns.emplace_back("still calling");
  std::string out = table_header(
      "When the device calls stop: seeds by the last repetition that made a device call (none after it), and seeds "
      "still calling in the last repetition:",
      columns);
  for (const auto& [family, f] : figures) {
    for (const std::string& peer : ordered_peers(f)) {
      auto found = f.peers.find(peer);
      if (found == f.peers.end()) continue;
      const peer_figures& p = found->second;
      std::size_t counted = p.steady_calling;
      for (const auto& entry : p.settled_after) counted += entry.second;
      if (counted == 0) continue;  // no repetition counts for this peer (one repetition, no counters)
      out += "| " + family + " | " + peer + " |";
      for (int pass = 1; pass <= last_column; ++pass) {
        auto at = p.settled_after.find(pass);
        out += " " + std::to_string(at == p.settled_after.end() ? 0 : at->second) + " |";
      }
      out += " " + std::to_string(p.steady_calling) + " |\n";
    }
  }
  return out;
}

// Note [Steady state]: host ns/op of each repetition, geometric mean over the seeds: the
// median the first table gives is one of them, and a peer that settles over several
// repetitions (loop plans) spends its time in other ones than a peer that settles at once.
std::string host_time_by_pass_table(const std::vector<std::pair<std::string, family_figures>>& figures) {
  std::size_t passes = 0;
  for (const auto& [family, f] : figures)
    for (const auto& [peer, p] : f.peers) passes = std::max(passes, p.ns_by_pass.size());
  if (passes < 2) return "";
  std::string out = table_header(
      "Host ns/op by repetition (geometric mean over the seeds; the host ns/op above is the median repetition of each "
      "seed):",
      numbered("pass ", passes));
  for (const auto& [family, f] : figures) {
    for (const std::string& peer : ordered_peers(f)) {
      auto found = f.peers.find(peer);
      if (found == f.peers.end() || found->second.ns_by_pass.empty()) continue;
      out += "| " + family + " | " + peer + " |";
      for (std::size_t pass = 0; pass < passes; ++pass)
        out += " " + (pass < found->second.ns_by_pass.size() ? fixed(found->second.ns_by_pass[pass].value(), 0) : "-") + " |";
      out += "\n";
    }
  }
  return out;
}

// Note [Host work]: the longest single call of each seed, over the seeds -- the stalls
// the medians above hide, a loop plan laid out on the allocating thread among them, also
// where it falls at one of the replay's untimed frees of blocks left live at a pass's end.
std::string longest_call_table(const std::vector<std::pair<std::string, family_figures>>& figures) {
  bool any = false;
  for (const auto& [family, f] : figures)
    for (const auto& [peer, p] : f.peers) any = any || !p.longest_op_ns.empty();
  if (!any) return "";
  std::string out = table_header(
      "Longest single allocator call of each seed, over all repetitions and the replay's own frees at a pass's end, "
      "in microseconds (its median over the seeds, the 90th percentile and the worst): the stalls the host ns/op "
      "above hide, such as a loop plan laid out on the allocating thread:",
      {"median (us)", "90th percentile (us)", "worst (us)"});
  for (const auto& [family, f] : figures) {
    for (const std::string& peer : ordered_peers(f)) {
      auto found = f.peers.find(peer);
      if (found == f.peers.end() || found->second.longest_op_ns.empty()) continue;
      const std::vector<double>& ns = found->second.longest_op_ns;
      out += "| " + family + " | " + peer + " | " + fixed(median(ns) / 1000.0, 0) + " | " +
             fixed(percentile(ns, 0.9) / 1000.0, 0) + " | " + fixed(percentile(ns, 1.0) / 1000.0, 0) + " |\n";
    }
  }
  return out;
}

// Note [Steady state]: for fragless, what runs of 2 .. N-1 repetitions would have reported
// (the goals' steady-pass calls and host ns/op), read from this run's first repetitions.
std::string shorter_runs_table(const std::vector<std::pair<std::string, family_figures>>& figures) {
  std::size_t passes = 0;
  for (const auto& [family, f] : figures) passes = std::max(passes, f.goals.shorter_runs.size());
  if (passes < 3) return "";
  std::vector<std::string> columns;
  for (std::size_t k = 2; k < passes; ++k) {
    columns.push_back("calls in pass " + std::to_string(k));
    columns.push_back("host / PyTorch, " + std::to_string(k) + " passes");
  }
  std::string out = table_header(
      "What a shorter run would have reported, from this run's first repetitions (fragless; a run of k repetitions "
      "counts the k-th as its steady pass and takes the median of the k as its host time): seeds whose k-th "
      "repetition calls the device where PyTorch's makes no call, of those where PyTorch's makes none; and host "
      "ns/op, median of the first k, over PyTorch's (geometric mean):",
      columns);
  for (const auto& [family, f] : figures) {
    const goal_figures& g = f.goals;
    out += "| " + family + " | " + focus + " |";
    for (std::size_t k = 2; k < passes; ++k) {
      if (k > g.shorter_runs.size()) {
        out += " - | - |";
        continue;
      }
      const goal_figures::shorter_run& run = g.shorter_runs[k - 1];
      out += " " + of(run.calling, run.pytorch_zero) + " | " + fixed(run.ns_ratio.value(), 2) + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string format_corpus_markdown(const std::vector<corpus_row>& rows, const std::vector<std::string>& families,
                                   const std::string& command_line) {
  const auto figures = all_figures(rows, families);
  std::string out = "Command: `" + command_line + "`\n\n";
  out += "| family | peer | seeds ok | peak/ideal geomean | worst | device calls (first pass) | seeds with calls in the steady pass | host ns/op geomean | est. allocator time, first pass, geomean (us) | est. steady pass, geomean (us) |\n";
  out += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [family, f] : figures) {
    for (const std::string& peer : ordered_peers(f)) {
      auto found = f.peers.find(peer);
      if (found == f.peers.end()) continue;
      const peer_figures& p = found->second;
      const bool packer = peer == "ideal-packer";
      out += "| " + family + " | " + peer + " | " + of(p.ok, p.seeds) + " | " + fixed(p.ratio.value(), 3) + " | " +
             fixed(p.worst_ratio, 3) + " | " + fixed(p.device_calls, 0) + (packer ? " page maps+unmaps" : "") + " | " +
             (packer ? "-" : std::to_string(p.steady_calling)) + " | " + fixed(p.ns_per_op.value(), 0) + " | " +
             fixed(p.first_pass_ns.value() / 1000.0, 1) + " | " + fixed(p.steady_pass_ns.value() / 1000.0, 1) + " |\n";
    }
  }
  out += settling_table(figures);
  out += host_time_by_pass_table(figures);
  out += longest_call_table(figures);
  out += goals_table("Goals for fragless, per family (a count is seeds where the goal is missed, of seeds compared):",
                     "family", figures);
  // Note [Goals by program size]
  const auto by_size = figures_by_size(rows);
  if (!by_size.empty())
    out += goals_table("The same goals by program size, a seed's ideal (the most bytes live at once), over every family:",
                       "program size", by_size);
  out += shorter_runs_table(figures);
  return out;
}

std::string format_corpus_json(const std::vector<corpus_row>& rows, const std::vector<std::string>& families,
                               const std::string& command_line) {
  const auto figures = all_figures(rows, families);
  auto number = [](double value) { return std::isfinite(value) ? fixed(value, 6) : std::string("null"); };
  std::string out = "{\n  \"command\": \"";
  for (char c : command_line) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  out += "\",\n  \"families\": [\n";
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const auto& [family, f] = figures[i];
    out += "    {\"family\": \"" + family + "\", \"peers\": [";
    bool first = true;
    for (const auto& [peer, p] : f.peers) {
      out += first ? "" : ", ";
      first = false;
      out += "{\"peer\": \"" + peer + "\", \"seeds\": " + std::to_string(p.seeds) + ", \"ok\": " + std::to_string(p.ok) +
             ", \"ratio_geomean\": " + number(p.ratio.value()) + ", \"ratio_worst\": " + number(p.worst_ratio) +
             ", \"device_calls\": " + number(p.device_calls) + ", \"seeds_with_steady_calls\": " +
             std::to_string(p.steady_calling) + ", \"host_ns_per_op_geomean\": " + number(p.ns_per_op.value()) +
             ", \"estimated_first_pass_ns_geomean\": " + number(p.first_pass_ns.value()) +
             ", \"estimated_steady_pass_ns_geomean\": " + number(p.steady_pass_ns.value()) + ", \"host_ns_per_op_by_pass_geomean\": [";
      for (std::size_t pass = 0; pass < p.ns_by_pass.size(); ++pass)
        out += (pass == 0 ? "" : ", ") + number(p.ns_by_pass[pass].value());
      // Null without the figure (median and percentile read 0 for no seeds).
      auto longest = [&](double figure) { return number(p.longest_op_ns.empty() ? std::nan("") : figure); };
      out += "], \"longest_op_ns_median\": " + longest(median(p.longest_op_ns)) +
             ", \"longest_op_ns_p90\": " + longest(percentile(p.longest_op_ns, 0.9)) +
             ", \"longest_op_ns_worst\": " + longest(percentile(p.longest_op_ns, 1.0));
      out += ", \"settled_after_pass\": {";
      bool first_pass = true;
      for (const auto& [pass, count] : p.settled_after) {
        out += (first_pass ? "\"" : ", \"") + std::to_string(pass) + "\": " + std::to_string(count);
        first_pass = false;
      }
      out += "}}";
    }
    out += "], \"goals\": " + goals_json(f.goals);
    out += "}";
    out += i + 1 == figures.size() ? "\n" : ",\n";
  }
  // Note [Goals by program size]
  out += "  ],\n  \"by_size\": [\n";
  const auto by_size = figures_by_size(rows);
  for (std::size_t i = 0; i < by_size.size(); ++i)
    out += "    {\"size\": \"" + by_size[i].first + "\", \"goals\": " + goals_json(by_size[i].second.goals) + "}" +
           (i + 1 == by_size.size() ? "\n" : ",\n");
  return out + "  ]\n}\n";
}

}  // namespace fragless::bench
