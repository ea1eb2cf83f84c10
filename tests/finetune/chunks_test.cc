// Segment recurrence in fine-tuning (finetune/chunks.h): the chunk layout of
// a long input, and what chunk-by-chunk forwards with memory equal.
#include "finetune/chunks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data_pipeline/tokenizer.h"
#include "finetune/examples.h"
#include "model/multiple_choice.h"
#include "model/sequence_classification.h"
#include "tests/finetune/finetune_test_env.h"
#include "tests/model/test_util.h"

namespace xlnet::finetune {
namespace {

using testing::SmallTokenizer;
using xlnet::testing::MaxAbsDiff;
using xlnet::testing::ReportDiff;

constexpr int64_t kChunk = 5;   // C
constexpr int64_t kChunks = 4;  // K
constexpr int64_t kPad[] = {0, 7, 16};

// Three rows of K*C = 20 official-layout tokens (`A <sep> B <sep> <cls>`,
// left padded) with 0, 7 and 16 padding positions: row 1's first chunk is
// all padding and its second starts with 2 padding positions; row 2 fits
// the last chunk.
XLNetInputs LongInputs() {
  const int64_t b = 3, w = kChunk * kChunks;
  torch::manual_seed(21);
  XLNetInputs x;
  x.input_ids = torch::randint(10, 50, {b, w}, torch::kLong);
  x.token_type_ids = torch::zeros({b, w}, torch::kLong);
  x.attention_mask = torch::ones({b, w});
  for (int64_t r = 0; r < b; ++r) {
    const int64_t pad = kPad[r];
    const int64_t b_start = pad + (w - pad) / 2;  // text B from here
    for (int64_t i = 0; i < w; ++i) {
      if (i < pad) {
        x.input_ids[r][i] = data::kPadId;
        x.token_type_ids[r][i] = kSegPad;
        x.attention_mask[r][i] = 0;
      } else if (i >= b_start) {
        x.token_type_ids[r][i] = kSegB;
      }
    }
    x.input_ids[r][b_start - 1] = data::kSepId;
    x.input_ids[r][w - 2] = data::kSepId;
    x.input_ids[r][w - 1] = data::kClsId;
    x.token_type_ids[r][w - 1] = kSegCls;
  }
  return x;
}

XLNetForSequenceClassification MakeClassifier(const std::string& attn_type) {
  XLNetConfig config = xlnet::testing::TinyConfig();
  config.attn_type = attn_type;
  config.initializer_range = 0.3;  // attention far from uniform
  config.id2label = {"a", "b", "c"};
  torch::manual_seed(5);
  XLNetForSequenceClassification model(config);
  model->eval();
  return model;
}

// The last chunk's hidden states [B, C, D] of chunk-by-chunk forwards.
torch::Tensor ChunkedLastHidden(XLNetForSequenceClassification& model,
                                const XLNetInputs& x, int64_t mem_len) {
  const XLNetInputs last = LastChunkWithMemory(*model->transformer, x,
                                               ChunkOptions{kChunk, mem_len});
  return model->transformer->forward(last).last_hidden_state;
}

TEST(ChunksTest, CausalChunksWithWholePrefixMemoryEqualOneLongForward) {
  auto model = MakeClassifier("uni");
  const XLNetInputs x = LongInputs();
  torch::NoGradGuard no_grad;
  const torch::Tensor full = model->transformer->forward(x).last_hidden_state;
  const torch::Tensor full_last =
      full.narrow(1, (kChunks - 1) * kChunk, kChunk);  // [B, C, D]
  // mem_len 0 (keep all) and exactly the prefix, (K-1)*C = 15 tokens.
  for (int64_t mem_len : {int64_t{0}, (kChunks - 1) * kChunk}) {
    EXPECT_LT(ReportDiff("uni last chunk, mem_len " + std::to_string(mem_len),
                         ChunkedLastHidden(model, x, mem_len), full_last),
              1e-5);
  }
  // So are the classifier's logits (the summary reads <cls>, the last
  // position of both).
  const XLNetInputs last =
      LastChunkWithMemory(*model->transformer, x, ChunkOptions{kChunk, 0});
  EXPECT_LT(ReportDiff("uni logits", model->forward(last).logits,
                       model->forward(x).logits),
            1e-5);
  // The memory matters: one chunk of memory (5 tokens) is not the whole
  // prefix, and row 0 (no padding) then differs.
  const torch::Tensor short_mem = ChunkedLastHidden(model, x, kChunk);
  EXPECT_GT(MaxAbsDiff(short_mem[0], full_last[0]), 1e-3);
}

// Multiple choice (RACE, long articles): every option sequence is one
// chunked row. The three rows of LongInputs() as one question with three
// options, and as two questions (the second with the options reversed).
TEST(ChunksTest, MultipleChoiceChunksEqualOneLongForward) {
  XLNetConfig config = xlnet::testing::TinyConfig();
  config.attn_type = "uni";
  config.initializer_range = 0.3;
  torch::manual_seed(6);
  XLNetForMultipleChoice model(config);
  model->eval();
  const XLNetInputs rows = LongInputs();  // [3, K*C]
  XLNetInputs x;                          // [2, 3, K*C]
  x.input_ids = torch::stack({rows.input_ids, rows.input_ids.flip({0})});
  x.token_type_ids =
      torch::stack({rows.token_type_ids, rows.token_type_ids.flip({0})});
  x.attention_mask =
      torch::stack({rows.attention_mask, rows.attention_mask.flip({0})});
  torch::NoGradGuard no_grad;
  const torch::Tensor full = model->forward(x);  // [2, 3]
  XLNetInputs flat;                              // [6, K*C]
  flat.input_ids = x.input_ids.flatten(0, 1);
  flat.token_type_ids = x.token_type_ids.flatten(0, 1);
  flat.attention_mask = x.attention_mask.flatten(0, 1);
  const torch::Tensor chunked = model->ForwardFlat(
      LastChunkWithMemory(*model->transformer, flat, ChunkOptions{kChunk, 0}),
      3);
  ASSERT_EQ(chunked.sizes(), torch::IntArrayRef({2, 3}));
  EXPECT_LT(ReportDiff("multiple choice uni logits", chunked, full), 1e-5);
  // The second question's scores are the first's, reversed.
  EXPECT_LT(MaxAbsDiff(chunked[1], chunked[0].flip({0})), 1e-6);
  // Memory of one chunk is not the whole prefix: the scores move.
  const torch::Tensor short_mem =
      model->ForwardFlat(LastChunkWithMemory(*model->transformer, flat,
                                             ChunkOptions{kChunk, kChunk}),
                         3);
  EXPECT_GT(MaxAbsDiff(short_mem, full), 1e-4);
  // Flattened rows that do not split into options are refused.
  EXPECT_ANY_THROW(model->ForwardFlat(flat, 4));
}

TEST(ChunksTest, BidirectionalChunksDifferFromOneLongForward) {
  // With attn_type "bi" a long forward lets early tokens see later ones; a
  // chunk cannot see the chunks after it. Nothing to equal: only different.
  auto model = MakeClassifier("bi");
  const XLNetInputs x = LongInputs();
  torch::NoGradGuard no_grad;
  const torch::Tensor full = model->transformer->forward(x).last_hidden_state;
  const torch::Tensor chunked = ChunkedLastHidden(model, x, 0);
  EXPECT_GT(
      MaxAbsDiff(chunked[0], full[0].narrow(0, (kChunks - 1) * kChunk, kChunk)),
      1e-3);
}

TEST(ChunksTest, PaddingInMemoryIsHiddenSoShortRowsEqualOneChunk) {
  // Row 2 fits the last chunk: whatever the other rows of its batch need,
  // its result is that of the last chunk alone, without memory (so a short
  // input costs and gives what truncation gives), for both attention types.
  for (const std::string attn : {"uni", "bi"}) {
    auto model = MakeClassifier(attn);
    const XLNetInputs x = LongInputs();
    torch::NoGradGuard no_grad;
    const XLNetInputs last =
        LastChunkWithMemory(*model->transformer, x, ChunkOptions{kChunk, 0});
    ASSERT_EQ(last.mems.size(), 2u);
    EXPECT_EQ(last.mems[0].size(0), (kChunks - 1) * kChunk);
    // Row 1's memory: 7 padding rows hidden, 8 real ones visible.
    EXPECT_EQ(last.mems_attention_mask[1].sum().item<float>(), 8.0f);
    XLNetInputs alone;
    alone.input_ids = x.input_ids.narrow(0, 2, 1).narrow(1, 15, kChunk);
    alone.token_type_ids = x.token_type_ids.narrow(0, 2, 1).narrow(1, 15, 5);
    alone.attention_mask = x.attention_mask.narrow(0, 2, 1).narrow(1, 15, 5);
    EXPECT_LT(ReportDiff(attn + " short row", model->forward(last).logits[2],
                         model->forward(alone).logits[0]),
              1e-5);
    // Without the mask the padding memory would leak into row 2.
    XLNetInputs unmasked = last;
    unmasked.mems_attention_mask = torch::Tensor();
    EXPECT_GT(MaxAbsDiff(model->forward(unmasked).logits[2],
                         model->forward(alone).logits[0]),
              1e-4);
  }
}

TEST(ChunksTest, EarlierChunksGiveMemoryWithoutGradients) {
  auto model = MakeClassifier("bi");
  model->train();
  const XLNetInputs x = LongInputs();
  const XLNetInputs last =
      LastChunkWithMemory(*model->transformer, x, ChunkOptions{kChunk, 10});
  ASSERT_EQ(last.mems.size(), 2u);
  EXPECT_EQ(last.mems[0].size(0), 10);  // mem_len
  EXPECT_EQ(last.mems_attention_mask.sizes(), torch::IntArrayRef({3, 10}));
  for (const auto& m : last.mems) EXPECT_FALSE(m.requires_grad());
  // The loss still trains every weight through the last chunk.
  const torch::Tensor loss = model->forward(last).logits.sum();
  loss.backward();
  EXPECT_TRUE(model->transformer->word_embedding->weight.grad().defined());
}

TEST(ChunksTest, FirstUsedChunkSkipsChunksPaddedInEveryRow) {
  torch::Tensor mask = torch::zeros({2, 12});
  mask.narrow(1, 7, 5).fill_(1);
  EXPECT_EQ(FirstUsedChunk(mask, 4), 1);
  mask[0][3] = 1;
  EXPECT_EQ(FirstUsedChunk(mask, 4), 0);
  EXPECT_EQ(FirstUsedChunk(torch::zeros({2, 12}), 4), 2);
  EXPECT_EQ(FirstUsedChunk(torch::zeros({0, 12}), 4), 2);
}

TEST(ChunksTest, LongInputIsPackedAsKChunksEndingWithSepCls) {
  FinetuneConfig ft;
  ft.long_inputs = LongInputs::kChunks;
  ft.max_seq_length = 16;
  ft.max_chunks = 3;
  ASSERT_EQ(EncodedLength(ft), 48);
  const data::Tokenizer& tok = SmallTokenizer();
  std::vector<TextExample> examples(2);
  examples[0].text_a =
      "The committee said the report was late, and the city council asked "
      "the mayor for a new plan before the end of the year.";
  examples[1].text_a = "A short one.";
  std::vector<int32_t> a0, a1;
  ASSERT_TRUE(tok.EncodeIds(examples[0].text_a, &a0).ok());
  ASSERT_TRUE(tok.EncodeIds(examples[1].text_a, &a1).ok());
  ASSERT_GT(a0.size(), 16u + 14u);  // needs all three chunks...
  ASSERT_LT(a0.size(), 46u);        // ...and is not truncated
  auto enc = EncodeExamples(examples, tok, TaskKind::kClassification, nullptr,
                            FeatureOptions{EncodedLength(ft)});
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->truncated, 0);
  const torch::Tensor ids = enc->input_ids.view({2, 3, 16});  // [N, K, C]
  const torch::Tensor seg = enc->token_type_ids.view({2, 3, 16});
  const torch::Tensor mask = enc->attention_mask.view({2, 3, 16});
  for (int64_t r = 0; r < 2; ++r) {
    const std::vector<int32_t>& a = r == 0 ? a0 : a1;
    const int64_t pad = 48 - static_cast<int64_t>(a.size()) - 2;
    // The last chunk ends with <sep> <cls> (segments A, CLS).
    EXPECT_EQ(ids[r][2][14].item<int64_t>(), data::kSepId);
    EXPECT_EQ(ids[r][2][15].item<int64_t>(), data::kClsId);
    EXPECT_EQ(seg[r][2][14].item<int64_t>(), kSegA);
    EXPECT_EQ(seg[r][2][15].item<int64_t>(), kSegCls);
    // Padding in front, then the text in order across the chunks.
    for (int64_t i = 0; i < 48 - 2; ++i) {
      const int64_t k = i / 16, j = i % 16;
      if (i < pad) {
        EXPECT_EQ(ids[r][k][j].item<int64_t>(), data::kPadId) << r << " " << i;
        EXPECT_EQ(seg[r][k][j].item<int64_t>(), kSegPad);
        EXPECT_EQ(mask[r][k][j].item<float>(), 0.0f);
      } else {
        EXPECT_EQ(ids[r][k][j].item<int64_t>(), a[i - pad]) << r << " " << i;
        EXPECT_EQ(seg[r][k][j].item<int64_t>(), kSegA);
        EXPECT_EQ(mask[r][k][j].item<float>(), 1.0f);
      }
    }
  }
  // Row 1 fits one chunk: its first two chunks are empty (skipped when it
  // is alone), and its last chunk is exactly its truncate-mode encoding.
  EXPECT_EQ(FirstUsedChunk(enc->attention_mask.narrow(0, 1, 1), 16), 2);
  auto one = EncodeExamples({examples[1]}, tok, TaskKind::kClassification,
                            nullptr, FeatureOptions{16});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(torch::equal(ids[1][2], one->input_ids[0]));
  EXPECT_TRUE(torch::equal(seg[1][2], one->token_type_ids[0]));
  // A pair keeps its segments across chunk boundaries: A 0, B 1.
  std::vector<TextExample> pair(1);
  pair[0].text_a = examples[0].text_a;
  pair[0].text_b = examples[1].text_a;
  auto p = EncodeExamples(pair, tok, TaskKind::kClassification, nullptr,
                          FeatureOptions{EncodedLength(ft)});
  ASSERT_TRUE(p.ok()) << p.status();
  const torch::Tensor ps = p->token_type_ids[0];
  const int64_t real = static_cast<int64_t>(a0.size() + a1.size()) + 3;
  ASSERT_LE(real, 48);
  const int64_t start = 48 - real;
  EXPECT_EQ(ps[start].item<int64_t>(), kSegA);
  EXPECT_EQ(ps[start + static_cast<int64_t>(a0.size())].item<int64_t>(),
            kSegA);  // the first <sep>
  EXPECT_EQ(ps[start + static_cast<int64_t>(a0.size()) + 1].item<int64_t>(),
            kSegB);
  EXPECT_EQ(ps[47].item<int64_t>(), kSegCls);
}

TEST(ChunksTest, OptionsFromConfig) {
  FinetuneConfig ft;
  XLNetConfig model;
  model.mem_len = 64;
  EXPECT_FALSE(UsesChunks(ft));
  EXPECT_EQ(EncodedLength(ft), ft.max_seq_length);
  ft.long_inputs = LongInputs::kChunks;
  EXPECT_TRUE(UsesChunks(ft));
  EXPECT_EQ(ChunkOptionsFromConfig(ft, model).mem_len, 64);  // -1: model's
  model.mem_len.reset();
  EXPECT_EQ(ChunkOptionsFromConfig(ft, model).mem_len, 0);  // null: all
  ft.mem_len = 32;
  EXPECT_EQ(ChunkOptionsFromConfig(ft, model).mem_len, 32);
  EXPECT_EQ(ChunkOptionsFromConfig(ft, model).chunk_len, ft.max_seq_length);
}

}  // namespace
}  // namespace xlnet::finetune
