#include "parallel/sharded_data_parallel.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "parallel/context_pointer.h"
#include "parallel/resident_storage.h"

namespace atl::parallel {

FlatLayout zero_layout(int zero_stage, int dp, int64_t bucket_bytes, int64_t element_bytes) {
  FlatLayout layout;
  layout.bucket_numel = std::max<int64_t>(1, bucket_bytes / element_bytes);
  // 64-byte parameter starts and shard pieces: whole cache lines, and vector loads stay aligned.
  layout.align = std::max<int64_t>(1, 64 / element_bytes);
  layout.shards = dp;
  layout.split_units = zero_stage >= 3;
  layout.separate_values = zero_stage >= 3;
  layout.separate_grads = zero_stage >= 2;
  return layout;
}

struct ShardedDataParallel::BucketState {
  comm::ShardRange owned{0, 0};  // the piece of the bucket this rank owns, bucket-relative
  int64_t shard_offset = 0;      // where that piece sits in the optimizer's coordinates
  int params = 0;
  int pending = 0;         // gradients still to land before this round's reduction
  bool dirty = false;      // holds gradients not yet reduced
  int rounds_reduced = 0;  // reductions launched this step; later ones add into the shard
  comm::WorkPtr reduction, gather;
  at::Tensor reduction_out;     // where the collective writes
  at::Tensor reduction_target;  // where the result belongs: copied or added there when not the same
  bool reduction_adds = false;
};

// Runs after a parameter's gradient has been accumulated into its .grad: the hook PyTorch's own
// register_post_accumulate_grad_hook installs (one per tensor, kept on the tensor itself, so it
// outlives the AccumulateGrad node autograd may recreate between backwards).
class ShardedDataParallel::GradientLanded final : public torch::autograd::PostAccumulateGradHook {
 public:
  GradientLanded(ShardedDataParallel& engine, size_t entry) : engine_(engine), entry_(entry) {}
  void operator()(const torch::autograd::Variable& param) override {
    // AccumulateGrad calls this hook also when it received no gradient (an undefined one: e.g. a
    // recomputed region's for a parameter the sink took, or one the region did not use). Nothing
    // landed then, and nothing is counted; the tensor hook before it saw whether one came.
    if (!engine_.incoming_[entry_]) return;
    engine_.incoming_[entry_] = 0;
    if (engine_.first_grad_copy_) engine_.land_gradient(entry_, param);
    engine_.on_gradient_ready(entry_);
  }

 private:
  ShardedDataParallel& engine_;
  size_t entry_;
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Identity in forward; in backward it makes the unit present again before the gradient flows on
// into the unit's own backward (ZeRO-3). The gate travels as its address (context_pointer.h); the
// engine outlives every graph built during training.
class RegatherForBackward : public torch::autograd::Function<RegatherForBackward> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, ParameterGate* gate, int64_t unit,
                            int64_t backward_next) {
    save_pointer(ctx, "gate", gate);
    ctx->saved_data["unit"] = unit;
    ctx->saved_data["next"] = backward_next;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    ParameterGate* gate = saved_pointer<ParameterGate>(ctx, "gate");
    gate->acquire(static_cast<int>(ctx->saved_data["unit"].toInt()),
                  static_cast<int>(ctx->saved_data["next"].toInt()));
    return {grads[0], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// dy^T x into `out`, in out's dtype: at::linear's backward product (the same matrix product) where
// the dtypes agree; with 16-bit operands and an fp32 buffer (mixed precision) accumulated and
// written in fp32 -- by cuBLAS itself on a GPU -- never rounded to 16 bits on the way.
void weight_gradient_into(at::Tensor& out, const at::Tensor& dy_t, const at::Tensor& x) {
  if (out.scalar_type() == x.scalar_type())
    at::mm_out(out, dy_t, x);
  else if (out.is_cuda())
    at::mm_out(out, dy_t, x, out.scalar_type());
  else
    at::mm_out(out, dy_t.to(out.scalar_type()), x.to(out.scalar_type()));
}

}  // namespace

ShardedDataParallel::ShardedDataParallel(FlatParameters& params, comm::Communicator& dp_group, int zero_stage,
                                         at::ScalarType reduce_dtype, bool first_grad_copy,
                                         bool fused_weight_gradients)
    : params_(params),
      group_(dp_group),
      stage_(zero_stage),
      reduce_dtype_(reduce_dtype),
      first_grad_copy_(first_grad_copy) {
  if (stage_ < 0 || stage_ > 3) throw std::invalid_argument("ZeRO stage must be 0, 1, 2 or 3");
  if (first_grad_copy_ && stage_ >= 2)
    throw std::invalid_argument("ShardedDataParallel: first_grad_copy is for ZeRO stages 0-1");
  // Landing a product relies on first_grad_copy's record of what landed this step.
  if (fused_weight_gradients && !first_grad_copy_)
    throw std::invalid_argument("ShardedDataParallel: fused_weight_gradients needs first_grad_copy");
  const std::vector<FlatBucket>& buckets = params.buckets();
  buckets_.resize(buckets.size());
  int64_t shard_numel = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    BucketState& s = buckets_[b];
    const FlatBucket& fb = buckets[b];
    if (stage_ >= 1 && fb.numel % group_.size() != 0)
      throw std::invalid_argument(
          "ShardedDataParallel: buckets must be laid out by zero_layout for this dp size");
    s.owned = stage_ == 0 ? comm::ShardRange{0, fb.numel}
                          : comm::shard_range(fb.numel, group_.size(), group_.rank());
    s.shard_offset = stage_ == 0 ? fb.offset : shard_numel;
    shard_numel += s.owned.numel;
    s.params = static_cast<int>(fb.end_entry - fb.first_entry);
  }
  // A unit needs every bucket holding one of its parameters (below ZeRO-3 a bucket may span units).
  for (const FlatEntry& e : params.entries()) {
    std::vector<size_t>& of_unit = unit_buckets_[e.info.unit];
    if (of_unit.empty() || of_unit.back() != e.bucket) of_unit.push_back(e.bucket);
  }
  const at::ScalarType value_dtype = buckets.empty() ? at::kFloat : buckets.front().values.scalar_type();
  const at::ScalarType grad_dtype = buckets.empty() ? at::kFloat : buckets.front().grads.scalar_type();
  if (reduce_dtype_ == at::ScalarType::Undefined) reduce_dtype_ = grad_dtype;
  if (stage_ == 0) {
    optimizer_grads_ = params.grads();
  } else {
    grad_shard_ = at::zeros({shard_numel}, at::TensorOptions().dtype(grad_dtype).device(params.device()));
    optimizer_grads_ = grad_shard_;
  }
  if (stage_ == 3) {
    // From here on this rank keeps only its pieces; units are gathered when used.
    value_shard_ = at::empty({shard_numel}, at::TensorOptions().dtype(value_dtype).device(params.device()));
    for (size_t b = 0; b < buckets.size(); ++b) {
      value_shard_.narrow(0, buckets_[b].shard_offset, buckets_[b].owned.numel).copy_(owned_values(b));
      release_storage(buckets[b].values);
    }
  }
  if (value_dtype == at::kFloat) {
    optimizer_values_ = compute_pieces();
  } else {
    master_ = at::cat(compute_pieces()).to(at::kFloat);
    optimizer_values_ = {master_};
  }
  if (stage_ >= 2)
    for (const FlatBucket& fb : buckets) release_storage(fb.grads);

  // Nothing to reduce and nothing to land: no hooks, no overhead.
  if (group_.size() == 1 && stage_ == 0 && !first_grad_copy_) return;
  if (first_grad_copy_) landed_.assign(params.entries().size(), 0);
  landings_.assign(params.entries().size(), 0);
  landings_expected_.assign(params.entries().size(), 1);
  incoming_.assign(params.entries().size(), 0);
  if (fused_weight_gradients)
    for (size_t i = 0; i < params.entries().size(); ++i)
      if (params.entries()[i].value.dim() == 2)
        sink_entries_.emplace(params.entries()[i].value.data_ptr(), i);
  for (size_t i = 0; i < params.entries().size(); ++i) {
    const FlatEntry& e = params.entries()[i];
    // Without a .grad of its own, autograd hands the parameter its gradient tensor for the hook to land.
    if (first_grad_copy_) e.value.mutable_grad().reset();
    // A tensor hook on a leaf runs right before its accumulation, with the gradient autograd hands
    // it (undefined where none came): it notes whether one comes, refuses one its bucket can no
    // longer take, and under ZeRO-2/3 makes the bucket's storage exist, free of a reduction in flight.
    const unsigned before = e.value.register_hook([this, i](const at::Tensor& grad) {
      if (!grad.defined()) return;
      check_can_land(i);
      if (stage_ >= 2) before_accumulate(params_.entries()[i].bucket);
      incoming_[i] = 1;
    });
    torch::autograd::impl::set_post_acc_grad_hooks(e.value, std::make_unique<GradientLanded>(*this, i));
    hooked_.push_back({e.value, before});
  }
}

ShardedDataParallel::~ShardedDataParallel() {
  // The hooks live on the parameters, which may outlive this engine: take them off first (and give
  // the parameters their flat gradients back as .grad).
  for (size_t i = 0; i < hooked_.size(); ++i) {
    HookedParameter& h = hooked_[i];
    h.param.remove_hook(h.before_hook);
    torch::autograd::impl::set_post_acc_grad_hooks(h.param, nullptr);
    if (first_grad_copy_) h.param.mutable_grad() = params_.entries()[i].grad;
  }
  // Hooks and requests point at this object and its buffers: drain everything in flight.
  for (BucketState& s : buckets_) {
    if (s.reduction) s.reduction->wait();
    if (s.gather) s.gather->wait();
  }
}

// The compute-dtype parameters the optimizer's result lands in, in the optimizer's order.
std::vector<at::Tensor> ShardedDataParallel::compute_pieces() const {
  if (stage_ == 0) return {params_.values()};
  if (stage_ == 3) return {value_shard_};
  std::vector<at::Tensor> pieces;
  for (size_t b = 0; b < buckets_.size(); ++b) pieces.push_back(owned_values(b));
  return pieces;
}

at::Tensor ShardedDataParallel::owned_values(size_t bucket) const {
  const BucketState& s = buckets_[bucket];
  return params_.buckets()[bucket].values.narrow(0, s.owned.offset, s.owned.numel);
}

const std::vector<size_t>& ShardedDataParallel::buckets_of(int unit) const {
  static const std::vector<size_t> kNone;
  auto it = unit_buckets_.find(unit);
  return it == unit_buckets_.end() ? kNone : it->second;
}

void ShardedDataParallel::start_step(int backwards_per_step) {
  step_started_ = group_.size() > 1 || stage_ >= 1;
  // Stages 0-1 reduce once, after every microbatch's gradient has been accumulated; stages 2-3
  // after each microbatch, so a bucket's full gradients never outlive one backward.
  arrivals_per_round_ = stage_ <= 1 ? backwards_per_step : 1;
  for (BucketState& s : buckets_) {
    s.pending = s.params * arrivals_per_round_;
    s.dirty = false;
    s.rounds_reduced = 0;
  }
  in_backward_ = false;
  std::fill(incoming_.begin(), incoming_.end(), 0);
  if (first_grad_copy_)
    std::fill(landed_.begin(), landed_.end(), 0);
  else
    params_.zero_grads();
}

void ShardedDataParallel::start_backward() {
  in_backward_ = true;
  std::fill(landings_.begin(), landings_.end(), 0);
}

void ShardedDataParallel::land_gradient(size_t entry, const at::Tensor& param) {
  at::Tensor& handed = param.mutable_grad();
  if (!handed.defined()) return;  // nothing handed over
  const at::Tensor& flat = params_.entries()[entry].grad;
  // First gradient of the step: a copy (exactly 0 + g); then sums in the order autograd's own adds
  // made them.
  if (landed_[entry])
    flat.add_(handed);
  else
    flat.copy_(handed);
  landed_[entry] = 1;
  handed.reset();  // so that the next backward hands over its gradient again
}

bool ShardedDataParallel::receives(const at::Tensor& weight) const {
  auto it = sink_entries_.find(weight.data_ptr());
  return it != sink_entries_.end() && params_.entries()[it->second].value.sizes() == weight.sizes();
}

void ShardedDataParallel::land_weight_gradient(const at::Tensor& weight, const at::Tensor& dy_rows,
                                               const at::Tensor& x_rows) {
  const size_t entry = sink_entries_.at(weight.data_ptr());
  check_can_land(entry);
  at::Tensor flat = params_.entries()[entry].grad.view(weight.sizes());
  // The step's first lands in place of the product's own output; later ones are added, as
  // first_grad_copy adds autograd's.
  if (landed_[entry]) {
    at::Tensor product = at::empty_like(flat);
    weight_gradient_into(product, dy_rows.t(), x_rows);
    flat.add_(product);
  } else {
    weight_gradient_into(flat, dy_rows.t(), x_rows);
  }
  landed_[entry] = 1;
  on_gradient_ready(entry);
}

void ShardedDataParallel::zero_unlanded_gradients() {
  // A parameter this step did not use keeps last step's gradient in the buffer: zeros, as without
  // first_grad_copy (a parameter with no gradient is one with a zero gradient).
  for (size_t i = 0; i < landed_.size(); ++i)
    if (!landed_[i]) params_.entries()[i].grad.zero_();
}

void ShardedDataParallel::before_accumulate(size_t bucket) {
  const at::Tensor& grads = params_.buckets()[bucket].grads;
  complete_reduction(bucket);  // the bucket is about to be written: its last reduction must be done
  if (!is_resident(grads)) {
    make_resident(grads);
    grads.zero_();
  }
}

void ShardedDataParallel::check_can_land(size_t entry) const {
  // Stages 0-1 reduce a bucket once a step, after its last gradient: one landing after that would
  // race with the reduction (stage 0, in place) or be reduced again with the whole bucket (stage 1).
  // Stages 2-3 start a new round, which before_accumulate makes ready.
  if (!step_started_ || stage_ >= 2 || buckets_[params_.entries()[entry].bucket].rounds_reduced == 0) return;
  throw std::logic_error("ShardedDataParallel: a gradient of " + params_.entries()[entry].info.name +
                         " landed after its bucket was reduced (it landed more often in this backward "
                         "than in the backwards before, whose landings its bucket waited for)");
}

void ShardedDataParallel::on_gradient_ready(size_t entry) {
  if (!step_started_) return;
  if (!in_backward_)
    throw std::logic_error("ShardedDataParallel: a gradient of " + params_.entries()[entry].info.name +
                           " landed before start_backward (call it before each backward of the step)");
  const size_t bucket = params_.entries()[entry].bucket;
  BucketState& s = buckets_[bucket];
  s.dirty = true;
  // A parameter arrives once per backward: with the landing that reaches the most it made in one
  // backward so far. One more (an inner backward into it, the sink and autograd both) adds into the
  // buffer and is learned for the backwards after; the bucket's count is not touched.
  const int landing = ++landings_[entry];
  if (landing > landings_expected_[entry]) {
    landings_expected_[entry] = landing;
  } else if (landing == landings_expected_[entry] && --s.pending == 0) {
    // Until a step has shown every parameter's landings, stages 0-1 (one reduction a step) leave it
    // to finish(): a parameter may still land again after the bucket's count completes.
    if (landings_learned_ || stage_ >= 2) launch_reduction(bucket);
  }
  poll();  // MPI progresses non-blocking collectives only inside MPI calls
}

void ShardedDataParallel::launch_reduction(size_t bucket) {
  BucketState& s = buckets_[bucket];
  const FlatBucket& fb = params_.buckets()[bucket];
  s.pending = s.params * arrivals_per_round_;
  s.dirty = false;
  // Reduced in reduce_dtype_: a converted copy when the gradients are kept in another dtype.
  const bool cast = fb.grads.scalar_type() != reduce_dtype_;
  const at::Tensor input = cast ? fb.grads.to(reduce_dtype_) : fb.grads;
  if (stage_ == 0) {
    s.reduction_target = fb.grads;
    s.reduction_out = input;
    s.reduction_adds = false;
    s.reduction = group_.all_reduce(input, comm::ReduceOp::kAvg);
  } else {
    s.reduction_target = grad_shard_.narrow(0, s.shard_offset, s.owned.numel);
    s.reduction_adds = s.rounds_reduced > 0;
    s.reduction_out =
        s.reduction_adds || cast ? at::empty({s.owned.numel}, input.options()) : s.reduction_target;
    s.reduction = group_.reduce_scatter(input, s.reduction_out, comm::ReduceOp::kAvg);
  }
  ++s.rounds_reduced;
  // The bucket's gradients of this round have all landed, so backward is done with its values.
  if (stage_ == 3) release_values(bucket);
}

void ShardedDataParallel::complete_reduction(size_t bucket) {
  BucketState& s = buckets_[bucket];
  if (!s.reduction) return;
  s.reduction->wait();
  s.reduction.reset();
  if (s.reduction_adds)
    s.reduction_target.add_(s.reduction_out);
  else if (!s.reduction_out.is_same(s.reduction_target))
    s.reduction_target.copy_(s.reduction_out);
  s.reduction_out = s.reduction_target = at::Tensor();
  if (stage_ >= 2) release_storage(params_.buckets()[bucket].grads);
}

void ShardedDataParallel::poll() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketState& s = buckets_[b];
    if (s.reduction && s.reduction->test()) complete_reduction(b);
    if (s.gather) s.gather->test();
  }
}

void ShardedDataParallel::finish() {
  if (first_grad_copy_) zero_unlanded_gradients();
  if (!step_started_) return;
  // Whatever did not complete a round (parameters unused this step) is reduced now, in bucket
  // order on every rank; a bucket that received nothing still contributes its zeros once.
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketState& s = buckets_[b];
    if (!s.dirty && s.rounds_reduced > 0) continue;
    if (stage_ >= 2) before_accumulate(b);
    launch_reduction(b);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) complete_reduction(b);
  // A rerun that gathered a unit again after its round (a reentrant recomputation) leaves it
  // resident: free it, or the next forward would read it as current after the optimizer step.
  release_all();
  step_started_ = false;
  landings_learned_ = true;
}

std::vector<ShardedDataParallel::OwnedRun> ShardedDataParallel::owned_runs() const {
  std::vector<OwnedRun> runs;
  const std::vector<FlatBucket>& buckets = params_.buckets();
  const std::vector<FlatEntry>& entries = params_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const FlatEntry& e = entries[i];
    const BucketState& s = buckets_[e.bucket];
    const int64_t owned_begin = buckets[e.bucket].offset + s.owned.offset;
    const int64_t begin = std::max(e.offset, owned_begin);
    const int64_t end = std::min(e.offset + e.numel, owned_begin + s.owned.numel);
    if (begin < end)
      runs.push_back({i, begin - e.offset, end - begin, s.shard_offset + (begin - owned_begin)});
  }
  return runs;
}

std::vector<ShardSpan> ShardedDataParallel::owned_spans(
    const std::function<bool(const FlatEntry&)>& keep) const {
  std::vector<ShardSpan> spans;
  for (const OwnedRun& run : owned_runs()) {
    if (!keep(params_.entries()[run.entry])) continue;
    if (!spans.empty() && spans.back().offset + spans.back().numel == run.offset)
      spans.back().numel += run.numel;  // neighbours merge: fewer, larger kernels
    else
      spans.push_back({run.offset, run.numel});
  }
  return spans;
}

at::Tensor ShardedDataParallel::optimizer_values_at(int64_t offset, int64_t numel) const {
  for (const at::Tensor& segment : optimizer_values_) {
    if (offset < segment.numel()) return segment.narrow(0, offset, numel);
    offset -= segment.numel();
  }
  throw std::out_of_range("optimizer_values_at: offset past the optimizer's values");
}

at::Tensor ShardedDataParallel::owned_bucket_gradient(size_t bucket) const {
  const BucketState& s = buckets_[bucket];
  return optimizer_grads_.narrow(0, s.shard_offset, s.owned.numel);
}

void ShardedDataParallel::start_gather(size_t bucket) {
  BucketState& s = buckets_[bucket];
  const FlatBucket& fb = params_.buckets()[bucket];
  if (s.gather) return;
  if (stage_ == 3) {
    if (is_resident(fb.values)) return;
    make_resident(fb.values);
    s.gather = group_.all_gather(value_shard_.narrow(0, s.shard_offset, s.owned.numel), fb.values);
  } else {
    s.gather = group_.all_gather(owned_values(bucket), fb.values);  // in place
  }
}

void ShardedDataParallel::wait_gather(size_t bucket) {
  BucketState& s = buckets_[bucket];
  if (!s.gather) return;
  s.gather->wait();
  s.gather.reset();
}

void ShardedDataParallel::release_values(size_t bucket) {
  wait_gather(bucket);
  release_storage(params_.buckets()[bucket].values);
}

void ShardedDataParallel::after_optimizer_step() {
  if (master_.defined()) {
    at::NoGradGuard no_grad;
    int64_t offset = 0;
    for (const at::Tensor& piece : compute_pieces()) {
      piece.copy_(master_.narrow(0, offset, piece.numel()));
      offset += piece.numel();
    }
  }
  if (stage_ == 1 || stage_ == 2)
    for (size_t b = 0; b < buckets_.size(); ++b) start_gather(b);
}

void ShardedDataParallel::gather_all() {
  if (stage_ == 0) return;
  if (stage_ == 3)
    for (size_t b = 0; b < buckets_.size(); ++b) start_gather(b);
  for (size_t b = 0; b < buckets_.size(); ++b) wait_gather(b);
}

void ShardedDataParallel::release_all() {
  if (stage_ == 3)
    for (size_t b = 0; b < buckets_.size(); ++b) release_values(b);
}

ModelStateBytes ShardedDataParallel::state_bytes() const {
  ModelStateBytes bytes;
  const auto resident_bytes = [](const at::Tensor& t) {
    return is_resident(t) ? static_cast<uint64_t>(t.nbytes()) : 0;
  };
  for (const FlatBucket& fb : params_.buckets()) {
    bytes.parameters += resident_bytes(fb.values);
    bytes.gradients += resident_bytes(fb.grads);
  }
  if (value_shard_.defined()) bytes.parameters += value_shard_.nbytes();
  if (grad_shard_.defined()) bytes.gradients += grad_shard_.nbytes();
  if (master_.defined()) bytes.optimizer += master_.nbytes();
  return bytes;
}

void ShardedDataParallel::acquire(int unit, int next) {
  if (stage_ == 0) return;
  for (size_t b : buckets_of(unit)) {
    if (stage_ == 3) start_gather(b);  // stages 1-2: started after the optimizer step
    wait_gather(b);
  }
  if (stage_ == 3 && next != kNoUnit)
    for (size_t b : buckets_of(next)) start_gather(b);
  poll();
}

at::Tensor ShardedDataParallel::release_after(int unit, const at::Tensor& output, int backward_next) {
  if (stage_ < 3) return output;
  at::Tensor out = output;
  if (at::GradMode::is_enabled() && output.requires_grad())
    out = RegatherForBackward::apply(output, static_cast<ParameterGate*>(this), unit, backward_next);
  for (size_t b : buckets_of(unit)) release_values(b);
  return out;
}

}  // namespace atl::parallel
