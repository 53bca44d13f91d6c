// Ranks sharing one GPU (run.share_gpu; the GPU suite on a one-GPU machine). NCCL refuses two ranks
// of one communicator on the same GPU of the same host: its duplicate-GPU check compares each peer's
// host hash and PCI bus id. A host id of its own per rank (NCCL_HOSTID, which NCCL hashes in place
// of the boot id and host name) makes NCCL see every rank as a node of its own, and so connect them
// through its network transport (sockets here): the real kernels, streams, errors and aborts, only
// with a socket hop per operation. Never the default: it is for tests, not for speed.
#pragma once

#include <string>

namespace atl::comm {

// The host id `world_rank` takes: "<host name>/atoll-rank-<world_rank>".
std::string shared_gpu_host_id(const std::string& host_name, int world_rank);

// Sets NCCL_HOSTID to shared_gpu_host_id(this host, world_rank), and NCCL_SOCKET_IFNAME to the
// loopback interface unless the user set one (every rank sharing a GPU is on this host). Must run
// before this process's first NCCL call: NCCL reads both when it first computes its host hash.
void give_rank_own_nccl_host(int world_rank);

}  // namespace atl::comm
