#include "runtime/model/model_description.h"

#include <charconv>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include "text/one_line.h"

namespace atl::runtime {
namespace {

constexpr const char* kDocumentMask = " document_mask=true";

// Round-trip exact, and short: 1e-05, not 1.0000000000000001e-05.
std::string shortest(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace

std::string describe_model(const ModelConfig& m) {
  return "vocab=" + std::to_string(m.vocab) + " dim=" + std::to_string(m.dim) +
         " layers=" + std::to_string(m.layers) + " heads=" + std::to_string(m.heads) +
         " kv_heads=" + std::to_string(m.kv_heads) + " ffn=" + std::to_string(m.ffn) +
         " seq=" + std::to_string(m.seq) + " tie_embeddings=" + (m.tie_embeddings ? "true" : "false") +
         " rope_theta=" + shortest(m.rope_theta) + " norm_eps=" + shortest(m.norm_eps) +
         (m.document_mask ? kDocumentMask : "");
}

bool same_architecture(const std::string& description, const ModelConfig& model) {
  ModelConfig unmasked = model;
  unmasked.document_mask = false;
  const std::string architecture = describe_model(unmasked);
  return description == architecture || description == architecture + kDocumentMask;
}

ModelConfig model_from_description(const std::string& description) {
  std::map<std::string, std::string> fields;
  std::istringstream in(description);
  for (std::string pair; in >> pair;) {
    const size_t eq = pair.find('=');
    if (eq != std::string::npos) fields[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  const auto field = [&](const std::string& key) {
    auto it = fields.find(key);
    if (it == fields.end())
      throw std::invalid_argument("the model description {" + text::one_line(description) + "} lacks " + key);
    return it->second;
  };
  const auto parsed = [&](const std::string& key, auto& out) {
    const std::string text = field(key);
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (error != std::errc() || end != text.data() + text.size())
      throw std::invalid_argument("the model description's " + key + "=" + text::one_line(text) +
                                  " is not a number");
  };
  ModelConfig m;
  parsed("vocab", m.vocab);
  parsed("dim", m.dim);
  parsed("layers", m.layers);
  parsed("heads", m.heads);
  parsed("kv_heads", m.kv_heads);
  parsed("ffn", m.ffn);
  parsed("seq", m.seq);
  parsed("rope_theta", m.rope_theta);
  parsed("norm_eps", m.norm_eps);
  m.tie_embeddings = field("tie_embeddings") == "true";
  m.document_mask = fields.count("document_mask") > 0 && fields.at("document_mask") == "true";
  // A damaged description must not reach the model's arithmetic (dim / heads, heads / kv_heads).
  const auto impossible = [&](const std::string& why) {
    return std::invalid_argument("the model description {" + text::one_line(description) +
                                 "} is impossible: " + why);
  };
  for (const int v : {m.vocab, m.dim, m.layers, m.heads, m.kv_heads, m.ffn, m.seq})
    if (v < 1) throw impossible("a size below 1");
  if (m.dim % m.heads != 0 || m.heads % m.kv_heads != 0)
    throw impossible("heads do not divide dim, or kv_heads do not divide heads");
  if (!(m.rope_theta > 0.0) || !(m.norm_eps > 0.0) || !std::isfinite(m.rope_theta) ||
      !std::isfinite(m.norm_eps))
    throw impossible("rope_theta and norm_eps must be positive");
  return m;
}

}  // namespace atl::runtime
