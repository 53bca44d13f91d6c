#include "runtime/data/side_encoder.h"

#include <atomic>
#include <exception>
#include <string_view>
#include <thread>

namespace atl::runtime {

int document_bos(const Tokenizer& tokenizer) {
  const std::string kind = tokenizer.description();
  // SentencePiece and bytes keep the joined text their shards always had.
  const bool bpe = kind.rfind("tiktoken", 0) == 0 || kind.rfind("tokenizer.json", 0) == 0;
  return bpe ? tokenizer.bos_id() : -1;
}

SideEncoder::SideEncoder(const Tokenizer& tokenizer, unsigned threads, SplitShards& shards)
    : tokenizer_(tokenizer),
      threads_(std::max(1u, threads)),
      shards_(shards),
      bos_(document_bos(tokenizer)) {}

void SideEncoder::add_text(std::string_view text, int source, int64_t documents) {
  if (pending_sources_.empty() || pending_sources_.back().second != source)
    pending_sources_.emplace_back(pending_.size(), source);
  pending_document_starts_.insert(pending_document_starts_.end(), static_cast<size_t>(documents),
                                  pending_.size());
  pending_.append(text);
  cut_pieces();
}

void SideEncoder::add_document(std::string text, int source) {
  queue({std::move(text), {source}, 1, true});
}

// Cuts pieces off pending_ as the whole text would be cut: after the first newline at or past
// kPieceBytes from the piece's start. A document counts in the piece its first byte is in.
void SideEncoder::cut_pieces() {
  while (pending_.size() > kPieceBytes) {
    const size_t newline = pending_.find('\n', std::max(kPieceBytes, scanned_));
    if (newline == std::string::npos) {
      scanned_ = pending_.size();
      return;
    }
    const size_t cut = newline + 1;
    Piece piece;
    piece.text = pending_.substr(0, cut);
    std::vector<size_t> later;
    for (const size_t start : pending_document_starts_) {
      if (start < cut) ++piece.documents;
      if (start >= cut) later.push_back(start - cut);
    }
    pending_document_starts_ = std::move(later);
    std::vector<std::pair<size_t, int>> rest;
    for (const auto& [start, source] : pending_sources_) {
      if (start < cut) piece.sources.push_back(source);
      if (start >= cut) rest.emplace_back(start - cut, source);
    }
    if (rest.empty() || rest.front().first > 0) rest.insert(rest.begin(), {0, piece.sources.back()});
    if (cut == pending_.size()) rest.clear();
    pending_sources_ = std::move(rest);
    pending_.erase(0, cut);
    scanned_ = 0;
    queue(std::move(piece));
  }
}

void SideEncoder::queue(Piece piece) {
  batch_bytes_ += piece.text.size();
  batch_.push_back(std::move(piece));
  // A few pieces per thread, so that the threads stay busy while memory stays at a few MB each.
  if (batch_bytes_ >= 4 * threads_ * kPieceBytes) encode_batch();
}

void SideEncoder::encode_batch() {
  std::vector<std::vector<uint32_t>> tokens(batch_.size());
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> failures(batch_.size());
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < batch_.size();) {
      try {
        if (batch_[i].bos) tokens[i].push_back(static_cast<uint32_t>(bos_));
        const std::vector<uint32_t> ids = tokenizer_.encode(batch_[i].text);
        tokens[i].insert(tokens[i].end(), ids.begin(), ids.end());
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads_, batch_.size()); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
  for (size_t i = 0; i < batch_.size(); ++i) shards_.add(tokens[i], batch_[i].sources, batch_[i].documents);
  batch_.clear();
  batch_bytes_ = 0;
}

void SideEncoder::finish() {
  if (!pending_.empty()) {
    Piece piece;
    piece.text = std::move(pending_);
    piece.documents = static_cast<int64_t>(pending_document_starts_.size());
    for (const auto& entry : pending_sources_) piece.sources.push_back(entry.second);
    pending_.clear();
    pending_sources_.clear();
    pending_document_starts_.clear();
    queue(std::move(piece));
  }
  if (!batch_.empty()) encode_batch();
}

}  // namespace atl::runtime
