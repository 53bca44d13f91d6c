#include "comm/string_gather.h"

#include "comm/mpi_check.h"

namespace atl::comm {

std::vector<std::string> all_gather_strings(MPI_Comm group, const std::string& mine) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(group, &size));
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, group));
  int total = 0;
  for (int i = 0; i < size; ++i) {
    offsets[static_cast<size_t>(i)] = total;
    total += lengths[static_cast<size_t>(i)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                           MPI_CHAR, group));
  std::vector<std::string> texts;
  for (int i = 0; i < size; ++i)
    texts.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(i)]),
                               static_cast<size_t>(lengths[static_cast<size_t>(i)])));
  return texts;
}

}  // namespace atl::comm
