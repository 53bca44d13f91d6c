// Precompiled header: the heavy, stable headers every Atoll translation unit needs.
#pragma once
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
