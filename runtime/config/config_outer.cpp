// The outer section (islands): its rows of the field table, NoLoCo's defaults, the rules on the
// outer optimizer's fields and on islands as separate jobs, and what island jobs must agree on.
#include "runtime/config/config_fields.h"

#include "comm/message_authenticator.h"
#include "comm/rendezvous_address.h"
#include "optim/outer/topk_codec.h"

namespace atl::runtime::config_detail {

std::vector<Field> outer_fields() {
  const SectionFields<OuterConfig> outer{"outer", &Config::outer};
  return {
      outer("algorithm", &OuterConfig::algorithm,
            "How islands meet: none averages gradients every step; the others every outer.inner_steps."),
      outer("inner_steps", &OuterConfig::inner_steps, "H: inner steps between outer syncs.", at_least(1)),
      outer("lr", &OuterConfig::lr, "Outer learning rate (noloco: 0.7 unless given).", above(0)),
      outer("momentum", &OuterConfig::momentum,
            "Outer momentum; 0: plain averaging (noloco: 0.5 unless given).", Range{0, 1, false, true}),
      outer("nesterov", &OuterConfig::nesterov, "Nesterov form of the outer momentum."),
      outer("fragments", &OuterConfig::fragments,
            "streaming_diloco: fragments of strided layers, one synced every inner_steps/fragments steps.",
            at_least(1)),
      outer("delay", &OuterConfig::delay,
            "streaming_diloco: steps an exchange overlaps before it lands; below inner_steps/fragments.",
            at_least(0)),
      outer("mix", &OuterConfig::mix,
            "streaming_diloco: theta = mix*theta + (1-mix)*phi when a fragment lands.",
            Range{0, 1, false, false}),
      outer("group_size", &OuterConfig::group_size, "noloco: islands per gossip group.", at_least(2)),
      outer("gamma", &OuterConfig::gamma, "noloco: pull towards the group mean (outer.lr unless given).",
            at_least(0)),
      outer("delayed", &OuterConfig::delayed,
            "diloco: round t's reduce overlaps round t+1's inner steps (one-step delay)."),
      outer("compression", &OuterConfig::compression, "Encoding of the exchanged pseudo-gradients."),
      outer("topk", &OuterConfig::topk,
            "SparseLoCo: send the topk largest of every 256 values, keep the rest as error "
            "feedback; 0: dense.",
            Range{0, static_cast<double>(optim::outer::kTopkChunk)}),
      outer("max_pseudo_grad_norm", &OuterConfig::max_pseudo_grad_norm,
            "Leaves out of a round an island whose pseudo-gradient is longer (L2); 0: no bound.",
            at_least(0)),
      outer("simulated_bandwidth_mbps", &OuterConfig::simulated_bandwidth_mbps,
            "Delays the outer exchange as over a link of this many Mbit/s; 0: no delay.", at_least(0)),
      outer("simulated_latency_ms", &OuterConfig::simulated_latency_ms,
            "Latency per message of the simulated link.", at_least(0)),
      outer("rendezvous", &OuterConfig::rendezvous,
            "Islands as separate jobs: HOST:PORT of their atoll rendezvous; none: one job holds all."),
      outer("island", &OuterConfig::island, "With a rendezvous: this job's island, 0 to parallel.islands-1.",
            at_least(-1)),
      outer("timeout_s", &OuterConfig::timeout_s,
            "With a rendezvous: seconds the islands wait for each other.", above(0)),
      outer("reconnect_s", &OuterConfig::reconnect_s,
            "With a rendezvous: seconds an island waits for a lost rendezvous to come back "
            "(restarted with its --state file) before it fails.",
            above(0)),
      outer("secret_file", &OuterConfig::secret_file,
            "With a rendezvous: the job's secret (>= 16 bytes, mode 600); required off loopback."),
      outer("min_islands", &OuterConfig::min_islands,
            "With a rendezvous: islands a round needs to close; 0: every island (fixed membership). "
            "Below parallel.islands (elastic): outer.algorithm diloco (delayed or not) or noloco.",
            at_least(0)),
      outer("grace_s", &OuterConfig::grace_s,
            "With min_islands: seconds a round waits for more once min_islands are there.", above(0)),
      outer("through_leader", &OuterConfig::through_leader,
            "Islands of different layouts: each island's rank 0 exchanges whole fragments for its "
            "island; false: every rank exchanges its slice with the other islands' ranks."),
  };
}

// NoLoCo's paper defaults differ from DiLoCo's: lr 0.7, momentum 0.5 and gamma = outer.lr, used
// when the file leaves those fields out.
void apply_outer_defaults(const YAML::Node& root, Config& config) {
  const YAML::Node outer = root["outer"];
  const auto given = [&outer](const char* key) {
    return outer.IsDefined() && outer.IsMap() && outer[key].IsDefined();
  };
  if (config.outer.algorithm == OuterAlgorithm::kNoLoCo) {
    if (!given("lr")) config.outer.lr = 0.7;
    if (!given("momentum")) config.outer.momentum = 0.5;
  }
  if (!given("gamma")) config.outer.gamma = config.outer.lr;
}

namespace {

// Islands as separate jobs: where they meet and which island this job is.
void validate_island_jobs(const Config& c, Problems& problems) {
  const OuterConfig& o = c.outer;
  if (!c.islands_are_jobs()) {
    if (o.has_secret())
      problems.push_back(
          "config: outer.secret_file applies only with outer.rendezvous (islands as separate "
          "jobs); set outer.rendezvous: HOST:PORT or drop outer.secret_file");
    if (o.min_islands != 0)
      problems.push_back("config: outer.min_islands = " + std::to_string(o.min_islands) +
                         " applies only with outer.rendezvous (islands as separate jobs); drop it or set "
                         "outer.rendezvous: HOST:PORT");
    if (o.island != -1)
      problems.push_back(
          "config: outer.island = " + std::to_string(o.island) +
          " applies only with outer.rendezvous (islands as separate jobs); set outer.rendezvous: "
          "HOST:PORT or drop outer.island");
    return;
  }
  try {
    const comm::RendezvousAddress address = comm::parse_rendezvous(o.rendezvous);
    if (!o.has_secret() && !comm::is_loopback_host(address.host))
      problems.push_back("config: outer.secret_file is required: outer.rendezvous = '" + o.rendezvous +
                         "' is not a loopback address, and islands meeting over a network must prove the "
                         "job's secret; make one with `openssl rand -hex 32 > FILE && chmod 600 FILE`, copy "
                         "it to every island and set outer.secret_file: FILE");
  } catch (const std::invalid_argument& e) {
    problems.push_back(std::string("config: ") + e.what());
  }
  if (o.has_secret()) {
    try {
      comm::MessageAuthenticator::from_file(o.secret_file);
    } catch (const std::invalid_argument& e) {
      problems.push_back(std::string("config: ") + e.what());
    }
  }
  if (o.min_islands > c.parallel.islands)
    problems.push_back("config: outer.min_islands = " + std::to_string(o.min_islands) +
                       " exceeds parallel.islands = " + std::to_string(c.parallel.islands) +
                       "; a round cannot wait for more islands than there are");
  if (c.islands_are_elastic() && o.algorithm != OuterAlgorithm::kDiLoCo &&
      o.algorithm != OuterAlgorithm::kNoLoCo)
    problems.push_back("config: outer.min_islands = " + std::to_string(o.min_islands) +
                       " below parallel.islands (a membership per round) works with outer.algorithm: diloco "
                       "(delayed or not) or noloco for now, not '" +
                       std::string(name_of(o.algorithm)) + "'; set outer.min_islands: " +
                       std::to_string(c.parallel.islands) + " or outer.algorithm: diloco");
  if (o.island < 0 || o.island >= c.parallel.islands)
    problems.push_back("config: outer.island = " + std::to_string(o.island) +
                       " must name this job's island, 0 to " + std::to_string(c.parallel.islands - 1) +
                       " (parallel.islands is the number of islands); pass --set outer.island=I");
}

}  // namespace

// The outer optimizer's fields that depend on each other and on the island count.
void validate_outer(const Config& c, Problems& problems) {
  validate_island_jobs(c, problems);
  const OuterConfig& o = c.outer;
  const OuterAlgorithm algorithm = o.algorithm;
  const std::string algorithm_name(name_of(algorithm));
  if (o.fragments > 1 && algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back("config: outer.fragments = " + std::to_string(o.fragments) +
                       " applies to outer.algorithm = streaming_diloco, not '" + algorithm_name +
                       "'; set outer.algorithm: streaming_diloco or outer.fragments: 1");
  if (o.delay > 0 && algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back("config: outer.delay = " + std::to_string(o.delay) +
                       " applies to outer.algorithm = streaming_diloco; use outer.delayed: true for "
                       "one-step-delayed DiLoCo, or set outer.delay: 0");
  if (o.delayed && algorithm != OuterAlgorithm::kDiLoCo)
    problems.push_back("config: outer.delayed = true applies to outer.algorithm = diloco, not '" +
                       algorithm_name + "'; set outer.algorithm: diloco or outer.delayed: false");
  if (algorithm == OuterAlgorithm::kStreamingDiLoCo) {
    require_divisible(problems, "outer.inner_steps", o.inner_steps, "outer.fragments", o.fragments,
                      "one fragment syncs every inner_steps/fragments steps; use a multiple of fragments");
    const int period = o.inner_steps / o.fragments;
    if (o.inner_steps % o.fragments == 0 && o.delay >= period)
      problems.push_back("config: outer.delay = " + std::to_string(o.delay) +
                         " must be below outer.inner_steps/outer.fragments = " + std::to_string(period) +
                         " (an exchange must land before its fragment's next one starts); lower outer.delay");
    if (o.fragments > c.model.layers)
      problems.push_back("config: outer.fragments = " + std::to_string(o.fragments) +
                         " exceeds model.layers = " + std::to_string(c.model.layers) +
                         " (fragments are strided layers); use at most that many fragments");
  }
  if (o.max_pseudo_grad_norm > 0 && algorithm != OuterAlgorithm::kDiLoCo &&
      algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back("config: outer.max_pseudo_grad_norm = " + shortest(o.max_pseudo_grad_norm) +
                       " applies to outer.algorithm = diloco or streaming_diloco (an average of "
                       "pseudo-gradients), not '" +
                       algorithm_name + "'; set outer.max_pseudo_grad_norm: 0");
  if (o.topk > 0 && algorithm != OuterAlgorithm::kDiLoCo && algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back(
        "config: outer.topk = " + std::to_string(o.topk) +
        " applies to outer.algorithm = diloco or streaming_diloco (a pseudo-gradient with error "
        "feedback), not '" +
        algorithm_name + "'; set outer.algorithm: diloco or outer.topk: 0");
  if (o.topk > 0 && c.islands_meet_canonically())
    problems.push_back(
        "config: outer.topk = " + std::to_string(o.topk) +
        " is not supported yet for island jobs of a fixed membership (they average in the "
        "canonical space, where error feedback would not match what was sent); set "
        "outer.min_islands below parallel.islands, run the islands in one job, or set outer.topk: 0");
  if (algorithm == OuterAlgorithm::kNoLoCo && c.parallel.islands > 1 && o.group_size > c.parallel.islands)
    problems.push_back("config: outer.group_size = " + std::to_string(o.group_size) +
                       " exceeds parallel.islands = " + std::to_string(c.parallel.islands) +
                       "; use a group size of at most the island count");
}

}  // namespace atl::runtime::config_detail

namespace atl::runtime {

using namespace config_detail;

std::string island_shared_settings(const Config& config) {
  static const std::set<std::string> own = {"outer.rendezvous",
                                            "outer.island",
                                            "outer.secret_file",
                                            "outer.timeout_s",
                                            "outer.grace_s",
                                            "outer.reconnect_s",
                                            "outer.simulated_bandwidth_mbps",
                                            "outer.simulated_latency_ms"};
  static const std::set<std::string> shared = {"parallel.islands", "run.seed", "train.steps",
                                               "train.global_batch"};
  std::string text;
  for (const Field& f : fields()) {
    // Islands that exchange rank by rank must also share one layout (canonically, each its own).
    const bool layout = f.section == "parallel" && !config.islands_meet_canonically();
    const bool whole_section =
        (f.section == "model" || f.section == "outer" || layout) && !own.count(f.name());
    if (whole_section || shared.count(f.name())) text += f.name() + ": " + f.show(config) + "\n";
  }
  return text;
}

}  // namespace atl::runtime
