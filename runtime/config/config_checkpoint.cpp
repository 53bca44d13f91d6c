// The checkpoint section: its rows of the field table.
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

std::vector<Field> checkpoint_fields() {
  const SectionFields<CheckpointConfig> checkpoint{"checkpoint", &Config::checkpoint};
  return {
      checkpoint("dir", &CheckpointConfig::dir, "Where checkpoints go; auto: <run.dir>/checkpoints."),
      checkpoint("every", &CheckpointConfig::every,
                 "Steps between checkpoints (and one at the end); 0: never.", at_least(0)),
      checkpoint("keep", &CheckpointConfig::keep, "Committed checkpoints kept; the newest is never deleted.",
                 at_least(1)),
      checkpoint("keep_every", &CheckpointConfig::keep_every,
                 "Also keeps every checkpoint whose step is a multiple of this; 0: none.", at_least(0)),
      checkpoint("mode", &CheckpointConfig::mode,
                 "sync waits for the write; async copies to host memory and writes behind; async_lazy "
                 "defers the copy too."),
      checkpoint("resume", &CheckpointConfig::resume,
                 "auto: the newest valid checkpoint in checkpoint.dir, if any; none; or a "
                 "checkpoint directory."),
  };
}

}  // namespace atl::runtime::config_detail
