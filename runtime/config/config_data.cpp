// The data section: its rows of the field table.
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

std::vector<Field> data_fields() {
  const SectionFields<DataConfig> data{"data", &Config::data};
  return {
      data("train", &DataConfig::train, "Token shard to train on (atoll data prepare writes it)."),
      data("val", &DataConfig::val, "Token shard of the validation loss."),
      data("tokenizer", &DataConfig::tokenizer,
           "What the ids mean: bytes, or the tokenizer the shards were encoded with: a SentencePiece model, "
           "Llama 3's tokenizer.model or a Hugging Face tokenizer.json (told apart by content)."),
  };
}

}  // namespace atl::runtime::config_detail
