// The data lines of the start-up summary and of `atoll plan`: what a run reads of each dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/dataset_source.h"

namespace atl::runtime {

// One dataset alone: "data: PATH (N sequences of S tokens, T tokens in K shards)<suffix>". A blend:
// "data: D datasets blended by weight (N sequences of S tokens)<suffix>", then a line per dataset
// (its shards, tokens, weight and the epochs the run takes through it). Then, when a dataset is read
// more than once in the run, one line naming each such dataset and its epochs.
std::vector<std::string> data_lines(const std::vector<DatasetUse>& train, int seq, const std::string& suffix);

}  // namespace atl::runtime
