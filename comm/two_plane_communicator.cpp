#include "comm/two_plane_communicator.h"

#include <stdexcept>

#include "comm/device_backend.h"
#include "comm/mpi_communicator.h"

namespace atl::comm {

TwoPlaneCommunicator::TwoPlaneCommunicator(std::unique_ptr<Communicator> control,
                                           std::unique_ptr<Communicator> device)
    : control_(std::move(control)), device_(std::move(device)) {
  label_ = control_->label();
  control_->count_into(counters());
  if (device_) device_->count_into(counters());
}

void TwoPlaneCommunicator::replace_control(std::unique_ptr<Communicator> control) {
  control_ = std::move(control);
  label_ = control_->label();
  control_->count_into(counters());
  control_->record_in(recorder());
}

DeviceBackend* TwoPlaneCommunicator::device_backend() const {
  return dynamic_cast<DeviceBackend*>(device_.get());
}

TwoPlaneCommunicator::~TwoPlaneCommunicator() = default;

int TwoPlaneCommunicator::rank() const {
  return control_->rank();
}
int TwoPlaneCommunicator::size() const {
  return control_->size();
}
const std::string& TwoPlaneCommunicator::name() const {
  return control_->name();
}

Communicator& TwoPlaneCommunicator::plane_of(const at::Tensor& tensor) const {
  if (tensor.defined() && tensor.is_cuda() && device_) return *device_;
  return *control_;  // MPI refuses a CUDA tensor itself, naming the fix
}

WorkPtr TwoPlaneCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  return plane_of(tensor).all_reduce(tensor, op);
}
WorkPtr TwoPlaneCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  return plane_of(input).reduce_scatter(input, output, op);
}
WorkPtr TwoPlaneCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  return plane_of(output).all_gather(input, output);
}
WorkPtr TwoPlaneCommunicator::broadcast(const at::Tensor& tensor, int root) {
  return plane_of(tensor).broadcast(tensor, root);
}

WorkPtr TwoPlaneCommunicator::batch_p2p(const std::vector<P2POp>& ops) {
  if (ops.empty()) return control_->batch_p2p(ops);
  Communicator& plane = plane_of(ops.front().tensor);
  for (const P2POp& op : ops)
    if (&plane_of(op.tensor) != &plane)
      throw std::invalid_argument("batch_p2p on " + label() + ": legs on " +
                                  ops.front().tensor.device().str() + " and " + op.tensor.device().str() +
                                  "; one batch runs on one device");
  return plane.batch_p2p(ops);
}

void TwoPlaneCommunicator::barrier() {
  control_->barrier();
}

void TwoPlaneCommunicator::connect_peers(const std::vector<int>& peers) {
  if (device_) device_->connect_peers(peers);
}

std::shared_ptr<void> TwoPlaneCommunicator::progress_in_background() {
  return control_->progress_in_background();
}

void TwoPlaneCommunicator::record_in(FlightRecorder* recorder) {
  Communicator::record_in(recorder);
  control_->record_in(recorder);
  if (device_) device_->record_in(recorder);
}

}  // namespace atl::comm
