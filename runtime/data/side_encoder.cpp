#include "runtime/data/side_encoder.h"

#include <algorithm>
#include <string_view>

namespace atl::runtime {

SideEncoder::SideEncoder(const Tokenizer& tokenizer, EncodingPipeline& pipeline, SplitShards& shards)
    : pipeline_(pipeline), shards_(shards), bos_(document_bos(tokenizer)), eos_(document_eos(tokenizer)) {}

void SideEncoder::add_text(std::string_view text, int source, int64_t documents) {
  if (pending_sources_.empty() || pending_sources_.back().second != source)
    pending_sources_.emplace_back(pending_.size(), source);
  pending_document_starts_.insert(pending_document_starts_.end(), static_cast<size_t>(documents),
                                  pending_.size());
  pending_.append(text);
  cut_pieces();
}

void SideEncoder::add_document(std::string text, int source) {
  queue({std::move(text), {source}, 1, bos_, eos_});
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
  group_bytes_ += piece.text.size();
  group_.push_back(std::move(piece));
  if (group_bytes_ >= kPieceBytes) submit_group();
}

void SideEncoder::submit_group() {
  pipeline_.submit(std::move(group_), shards_);
  group_.clear();
  group_bytes_ = 0;
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
  if (!group_.empty()) submit_group();
}

}  // namespace atl::runtime
