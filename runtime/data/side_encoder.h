// Frames one side of `atoll data prepare` (train or val) into pieces as its text arrives and hands
// them, about kPieceBytes at a time, to the EncodingPipeline that encodes them into the side's
// SplitShards -- never the whole side in memory.
//
// Two ways to frame documents, as the tokenizer's family expects:
//   joined  (bytes, or any tokenizer without --documents): the side is one text -- documents with
//           a blank line between them, or files with a newline -- encoded in pieces of about
//           kPieceBytes, each cut after a newline, exactly as if the whole text were cut at once;
//   bos     (documents, with a tokenizer that has a BOS: SentencePiece, Llama 3's tiktoken BPE, a
//           tokenizer.json with one): each document is encoded on its own, its tokens after the
//           BOS token, which is how the loader finds where documents start;
//   eos     (documents, with a tokenizer that has an EOS but no BOS: Qwen 2's tokenizer.json):
//           each document encoded on its own, the EOS token after its tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/data/encoding_pipeline.h"
#include "runtime/data/split_shards.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {

constexpr size_t kPieceBytes = size_t{1} << 20;

class SideEncoder {
 public:
  SideEncoder(const Tokenizer& tokenizer, EncodingPipeline& pipeline, SplitShards& shards);
  // Joined framing: more of the side's text, from input `source`; `documents` start in it.
  void add_text(std::string_view text, int source, int64_t documents);
  // BOS or EOS framing: one whole document from input `source`.
  void add_document(std::string text, int source);
  // Hands what is left (the text after the last cut) to the pipeline.
  void finish();

 private:
  void cut_pieces();
  void queue(Piece piece);
  void submit_group();

  EncodingPipeline& pipeline_;
  SplitShards& shards_;
  int bos_, eos_;
  // Joined framing: text not yet cut into a piece, with where each source's bytes and each document
  // start in it.
  std::string pending_;
  std::vector<std::pair<size_t, int>> pending_sources_;
  std::vector<size_t> pending_document_starts_;  // offsets in pending_
  size_t scanned_ = 0;  // bytes of pending_ past kPieceBytes known to hold no newline
  // Pieces not handed over yet: small documents go together, so one hand-over is about kPieceBytes.
  std::vector<Piece> group_;
  size_t group_bytes_ = 0;
};

}  // namespace atl::runtime
