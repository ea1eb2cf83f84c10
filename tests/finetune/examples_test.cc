// Readers (TSV, CSV, JSON Lines), configured columns, bad-row handling, label
// sets and the packed classifier input `A <sep> [B <sep>] <cls>` with left
// padding.
#include "finetune/examples.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "config/config.h"
#include "tests/finetune/finetune_test_env.h"
#include "tests/test_util.h"

namespace xlnet::finetune {
namespace {

using ::xlnet::finetune::testing::SmallTokenizer;

ExampleSet ParseOk(std::string_view contents, ExampleFormat format,
                   const ReadOptions& options = {}) {
  auto set = ParseExamples(contents, "in", format, options);
  EXPECT_TRUE(set.ok()) << set.status();
  return set.ok() ? *std::move(set) : ExampleSet{};
}

TEST(ReadTsvTest, SingleSentenceWithBomAndCrlf) {
  const std::string tsv =
      "\xEF\xBB\xBFsentence\tlabel\r\n"
      "A fine film .\t1\r\n"
      "\"Quoted\" stays raw\t0\r\n";
  ExampleSet set = ParseOk(tsv, ExampleFormat::kTsv);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.fields.text_a, "sentence");
  EXPECT_EQ(set.fields.text_b, "");
  EXPECT_EQ(set.fields.label, "label");
  EXPECT_EQ(set.examples[0].text_a, "A fine film .");
  EXPECT_EQ(set.examples[0].label, "1");
  EXPECT_EQ(set.examples[0].id, "0");
  EXPECT_EQ(set.examples[0].location, "in:2");
  // No quote processing: GLUE files are raw tab-separated fields.
  EXPECT_EQ(set.examples[1].text_a, "\"Quoted\" stays raw");
  EXPECT_EQ(set.examples[1].label, "0");
  EXPECT_EQ(set.examples[1].id, "1");
  EXPECT_TRUE(set.problems.empty());
}

TEST(ReadTsvTest, PairsWithIdColumnAndExtraColumns) {
  const std::string tsv =
      "idx\tgenre\tsentence1\tsentence2\tlabel\n"
      "7\tfiction\tThe cat sat.\tA cat was sitting.\tentailment\n"
      "9\tgov\tIt rained.\tThe sun shone.\tcontradiction\n";
  ExampleSet set = ParseOk(tsv, ExampleFormat::kTsv);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.fields.text_a, "sentence1");
  EXPECT_EQ(set.fields.text_b, "sentence2");
  EXPECT_EQ(set.fields.id, "idx");
  EXPECT_EQ(set.examples[1].id, "9");
  EXPECT_EQ(set.examples[1].text_b, "The sun shone.");
  EXPECT_EQ(set.examples[1].label, "contradiction");
}

TEST(ReadTsvTest, DetectsOtherGlueHeaders) {
  ExampleSet qnli = ParseOk(
      "index\tquestion\tsentence\tlabel\n0\tWho?\tHe did.\tentailment\n",
      ExampleFormat::kTsv);
  EXPECT_EQ(qnli.fields.text_a, "question");
  EXPECT_EQ(qnli.fields.text_b, "sentence");
  ExampleSet qqp = ParseOk(
      "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
      "1\t2\t3\tHow?\tWhy?\t0\n",
      ExampleFormat::kTsv);
  EXPECT_EQ(qqp.fields.text_a, "question1");
  EXPECT_EQ(qqp.fields.label, "is_duplicate");
  EXPECT_EQ(qqp.examples[0].label, "0");
}

TEST(ReadTsvTest, BadRowsAreSkippedAndReportedWithLines) {
  const std::string tsv =
      "sentence1\tsentence2\tlabel\n"
      "a\tb\tyes\n"         // 2: fine
      "only two\tfields\n"  // 3: column count
      "\n"                  // 4: empty line
      " \tb\tyes\n"         // 5: empty text A
      "a\tb\tmaybe\n"       // 6: unknown label
      "a\tb\t\n"            // 7: empty label
      "c\td\tno\n";         // 8: fine
  auto labels = LabelSet::FromNames({"no", "yes"});
  ASSERT_TRUE(labels.ok());
  ReadOptions options;
  options.bad_rows = BadRowPolicy::kSkip;
  options.labels = &*labels;
  ExampleSet set = ParseOk(tsv, ExampleFormat::kTsv, options);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.examples[1].location, "in:8");
  // Row ids count skipped rows, so they stay the row's position in the file.
  EXPECT_EQ(set.examples[1].id, "6");
  EXPECT_EQ(set.skipped, 5);
  const std::vector<std::string> expected = {
      "in:3: expected 3 tab-separated fields (as the header), found 2",
      "in:4: empty line",
      "in:5: empty text in field 'sentence1'",
      "in:6: unknown label 'maybe' (known: no, yes)",
      "in:7: empty label in field 'label'",
  };
  EXPECT_EQ(set.problems, expected);

  options.bad_rows = BadRowPolicy::kError;
  auto fatal = ParseExamples(tsv, "in", ExampleFormat::kTsv, options);
  ASSERT_FALSE(fatal.ok());
  EXPECT_EQ(fatal.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fatal.status().message().find("in:3: expected 3"),
            std::string::npos)
      << fatal.status();
}

TEST(ReadTsvTest, RegressionLabelsParseAsNumbers) {
  ReadOptions options;
  options.task = TaskKind::kRegression;
  options.bad_rows = BadRowPolicy::kSkip;
  ExampleSet set = ParseOk(
      "sentence1\tsentence2\tscore\n"
      "a\tb\t4.25\n"
      "a\tb\tfive\n"
      "a\tb\tnan\n"
      "a\tb\t-1e-1\n",
      ExampleFormat::kTsv, options);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_DOUBLE_EQ(set.examples[0].value, 4.25);
  EXPECT_DOUBLE_EQ(set.examples[1].value, -0.1);
  ASSERT_EQ(set.problems.size(), 2u);
  EXPECT_EQ(set.problems[0],
            "in:3: regression label 'five' is not a finite number");
  EXPECT_EQ(set.problems[1],
            "in:4: regression label 'nan' is not a finite number");
}

TEST(ReadTsvTest, HeaderErrorsNameTheFile) {
  auto no_text =
      ParseExamples("foo\tlabel\nx\t1\n", "t.tsv", ExampleFormat::kTsv, {});
  ASSERT_FALSE(no_text.ok());
  EXPECT_NE(no_text.status().message().find("t.tsv:1 (header): no text field"),
            std::string::npos)
      << no_text.status();
  auto no_label =
      ParseExamples("sentence\nx\n", "t.tsv", ExampleFormat::kTsv, {});
  ASSERT_FALSE(no_label.ok());
  EXPECT_NE(no_label.status().message().find("no label field"),
            std::string::npos);
  // Unlabeled prediction input is fine without a label column.
  ReadOptions unlabeled;
  unlabeled.require_label = false;
  ExampleSet set =
      ParseOk("index\tsentence\n4\tx\n", ExampleFormat::kTsv, unlabeled);
  ASSERT_EQ(set.examples.size(), 1u);
  EXPECT_FALSE(set.examples[0].has_label);
  EXPECT_EQ(set.examples[0].id, "4");
  EXPECT_EQ(set.fields.label, "");
}

TEST(ReadJsonlTest, ObjectsWithDetectedAndConfiguredFields) {
  const std::string jsonl =
      "{\"id\": \"q1\", \"question\": \"Who?\", \"sentence\": \"Me.\", "
      "\"label\": 1}\n"
      "{\"id\": 17, \"question\": \"Où?\", \"sentence\": \"Ici.\", "
      "\"label\": \"0\"}\n";
  ExampleSet set = ParseOk(jsonl, ExampleFormat::kJsonl);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.examples[0].id, "q1");
  EXPECT_EQ(set.examples[0].label, "1");
  EXPECT_EQ(set.examples[1].id, "17");
  EXPECT_EQ(set.examples[1].text_a, "Où?");
  EXPECT_EQ(set.examples[1].location, "in:2");

  ReadOptions options;
  options.fields.text_a = "review";
  options.fields.label = "stars";
  options.task = TaskKind::kRegression;
  ExampleSet custom = ParseOk(
      "{\"review\": \"ok\", \"stars\": 3.5}\n"
      "{\"review\": \"meh\", \"stars\": \"2\"}\n",
      ExampleFormat::kJsonl, options);
  ASSERT_EQ(custom.examples.size(), 2u);
  EXPECT_EQ(custom.fields.text_b, "");
  EXPECT_DOUBLE_EQ(custom.examples[0].value, 3.5);
  EXPECT_DOUBLE_EQ(custom.examples[1].value, 2.0);
}

TEST(ReadJsonlTest, BadLines) {
  const std::string jsonl =
      "{\"text\": \"good\", \"label\": \"pos\"}\r\n"
      "{\"text\": \"broken\", \"label\": \r\n"
      "[1, 2]\r\n"
      "{\"label\": \"pos\"}\r\n"
      "{\"text\": 3, \"label\": \"pos\"}\r\n"
      "{\"text\": \"x\", \"label\": 0.5}\r\n"
      "{\"text\": \"fine\", \"label\": \"neg\"}\r\n"
      "{\"text\": \"a\", \"label\": \"pos\", \"label\": \"neg\"}\r\n";
  ReadOptions options;
  options.bad_rows = BadRowPolicy::kSkip;
  ExampleSet set = ParseOk(jsonl, ExampleFormat::kJsonl, options);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.examples[1].text_a, "fine");
  EXPECT_EQ(set.examples[1].id, "6");
  const std::vector<std::string> expected = {
      "in:2: invalid JSON (JSON Lines: one object per line)",
      "in:3: expected a JSON object, found array (JSON Lines: one object per "
      "line)",
      "in:4: missing field 'text'",
      "in:5: field 'text' must be a string, found number",
      "in:6: field 'label' must be a string or an integer, found number",
      "in:8: duplicate key 'label'",
  };
  EXPECT_EQ(set.problems, expected);
}

TEST(ReadExamplesTest, FormatFromExtension) {
  EXPECT_EQ(*FormatFromPath("a/train.tsv"), ExampleFormat::kTsv);
  EXPECT_EQ(*FormatFromPath("dev.JSONL"), ExampleFormat::kJsonl);
  EXPECT_EQ(*FormatFromPath("dev.json"), ExampleFormat::kJsonl);
  EXPECT_EQ(*FormatFromPath("data/train.csv"), ExampleFormat::kCsv);
  EXPECT_EQ(*FormatFromPath("data/TRAIN.CSV"), ExampleFormat::kCsv);
  auto xlsx = FormatFromPath("data/train.xlsx");
  ASSERT_FALSE(xlsx.ok());
  EXPECT_NE(
      xlsx.status().message().find("data/train.xlsx: unknown data format"),
      std::string::npos);

  xlnet::testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir.Join("x.tsv"), "text\tlabel\nhi\tb\n").ok());
  auto set = ReadExamples(dir.Join("x.tsv"), {});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->examples[0].location, dir.Join("x.tsv") + ":2");
  auto missing = ReadExamples(dir.Join("none.tsv"), {});
  EXPECT_FALSE(missing.ok());
  ASSERT_TRUE(
      WriteFileAtomic(dir.Join("x.csv"), "text,label\n\"hi, you\",b\n").ok());
  set = ReadExamples(dir.Join("x.csv"), {});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->examples[0].text_a, "hi, you");
  EXPECT_EQ(set->examples[0].location, dir.Join("x.csv") + ":2");
}

TEST(ReadCsvTest, QuotedCommasNewlinesAndEscapedQuotes) {
  const std::string csv =
      "\xEF\xBB\xBFid,sentence,label\r\n"
      "a1,\"Commas, inside\",pos\r\n"
      "a2,\"He said \"\"no\"\"\",neg\r\n"
      "a3,\"two\r\nlines\nthree\",pos\n"  // starts on line 4, spans 3
      "a4,plain text,neg\n"
      "\"a5\",\"\"\"\",pos";  // last line without a line end
  ExampleSet set = ParseOk(csv, ExampleFormat::kCsv);
  ASSERT_EQ(set.examples.size(), 5u);
  EXPECT_EQ(set.fields.text_a, "sentence");
  EXPECT_EQ(set.fields.id, "id");
  EXPECT_EQ(set.examples[0].text_a, "Commas, inside");
  EXPECT_EQ(set.examples[0].location, "in:2");
  EXPECT_EQ(set.examples[1].text_a, "He said \"no\"");
  EXPECT_EQ(set.examples[1].label, "neg");
  // Line breaks inside quotes are kept as written.
  EXPECT_EQ(set.examples[2].text_a, "two\r\nlines\nthree");
  EXPECT_EQ(set.examples[2].location, "in:4");
  EXPECT_EQ(set.examples[3].text_a, "plain text");
  EXPECT_EQ(set.examples[3].location, "in:7");
  EXPECT_EQ(set.examples[4].id, "a5");
  EXPECT_EQ(set.examples[4].text_a, "\"");
  EXPECT_EQ(set.examples[4].location, "in:8");
  EXPECT_TRUE(set.problems.empty());
}

TEST(ReadCsvTest, PairTaskAndEmptyFields) {
  const std::string csv =
      "sentence1,sentence2,label\n"
      "The cat sat.,\"A cat, sitting.\",entailment\n"
      "It rained.,The sun shone.,contradiction\n"
      "x,,neutral\n";  // an empty second text is a bad row
  ReadOptions options;
  options.bad_rows = BadRowPolicy::kSkip;
  ExampleSet set = ParseOk(csv, ExampleFormat::kCsv, options);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.fields.text_b, "sentence2");
  EXPECT_EQ(set.examples[0].text_b, "A cat, sitting.");
  EXPECT_EQ(set.examples[1].label, "contradiction");
  EXPECT_EQ(set.problems,
            std::vector<std::string>{"in:4: empty text in field 'sentence2'"});
}

TEST(ReadCsvTest, MalformedRecordsAreBadRowsWithTheirLine) {
  const std::string csv =
      "text,label\n"
      "fine,a\n"
      "ab\"c,a\n"             // 3: a quote inside an unquoted field
      "\"quoted\"tail,a\n"    // 4: text after the closing quote
      "one,two,three\n"       // 5: three fields
      "\n"                    // 6: empty line
      "\"multi\nline\",b\n";  // 7-8: fine
  ReadOptions options;
  options.bad_rows = BadRowPolicy::kSkip;
  ExampleSet set = ParseOk(csv, ExampleFormat::kCsv, options);
  ASSERT_EQ(set.examples.size(), 2u);
  EXPECT_EQ(set.examples[1].location, "in:7");
  EXPECT_EQ(set.examples[1].id, "5");
  const std::vector<std::string> expected = {
      "in:3: a quote inside unquoted field 1 (quote the whole field and write "
      "the quote as \"\")",
      "in:4: text after the closing quote of field 1 (a quote inside a quoted "
      "field is written \"\")",
      "in:5: expected 2 comma-separated fields (as the header), found 3",
      "in:6: empty line",
  };
  EXPECT_EQ(set.problems, expected);
}

TEST(ReadCsvTest, UnterminatedQuoteAndLimitsAreErrorsWithTheLine) {
  auto open = ParseExamples("text,label\nok,a\n\"never closed,a\nmore,b\n",
                            "u.csv", ExampleFormat::kCsv, {});
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("u.csv:3: unterminated quoted field"),
            std::string::npos)
      << open.status();
  // Even with bad_rows: skip (the rest of the file cannot be delimited).
  ReadOptions skip;
  skip.bad_rows = BadRowPolicy::kSkip;
  EXPECT_FALSE(
      ParseExamples("text,label\n\"x,a\n", "u.csv", ExampleFormat::kCsv, skip)
          .ok());

  ReadOptions small;
  small.max_csv_field_bytes = 8;
  small.max_csv_record_bytes = 12;
  auto field = ParseExamples("text,label\nshort,a\n\"123456789\",a\n", "l.csv",
                             ExampleFormat::kCsv, small);
  ASSERT_FALSE(field.ok());
  EXPECT_NE(
      field.status().message().find("l.csv:3: a field longer than 8 bytes"),
      std::string::npos)
      << field.status();
  auto record = ParseExamples("text,label\n1234567,1234567\n", "l.csv",
                              ExampleFormat::kCsv, small);
  ASSERT_FALSE(record.ok());
  EXPECT_NE(
      record.status().message().find("l.csv:2: a record longer than 12 bytes"),
      std::string::npos)
      << record.status();
  auto empty = ParseExamples("", "e.csv", ExampleFormat::kCsv, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("e.csv: empty file"),
            std::string::npos);
}

// TSV and JSON Lines lines are bounded: a file without line ends is an
// error naming the line and quoting its start, not echoing all of it (a
// 2 GB line once took 10.6 GB and came back whole in the message).
TEST(ReadTsvTest, OverlongLineIsAnErrorQuotingItsStart) {
  ReadOptions small;
  small.max_line_bytes = 64;
  const std::string long_text(1000, 'x');
  for (const auto& [format, contents, line] :
       std::vector<std::tuple<ExampleFormat, std::string, int>>{
           {ExampleFormat::kTsv, "text\tlabel\n" + long_text + "\ta\n", 2},
           {ExampleFormat::kTsv, long_text + "\tlabel\n", 1},
           {ExampleFormat::kJsonl,
            "{\"text\": \"a\", \"label\": \"b\"}\n{\"text\": \"" + long_text +
                "\"}\n",
            2}}) {
    auto set = ParseExamples(contents, "big", format, small);
    ASSERT_FALSE(set.ok());
    const std::string message(set.status().message());
    EXPECT_NE(message.find(absl::StrCat("big:", line, ": a line of ")),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("over the limit of 64"), std::string::npos);
    EXPECT_LT(message.size(), 200u) << message;
  }
  // At the limit is fine.
  small.max_line_bytes = 11;
  EXPECT_TRUE(
      ParseExamples("text\tlabel\nabc\tdef\n", "ok", ExampleFormat::kTsv, small)
          .ok());
}

// Labels are checked where they are read: invalid UTF-8 (which once failed
// only when the label set was written, after training), whitespace around
// a label (which made "pos " a class beside "pos") and the header row
// repeated inside the file (which became a class "label") are bad rows
// naming the file and line.
TEST(ReadTsvTest, LabelHygiene) {
  const std::string tsv =
      "sentence\tlabel\n"
      "a\tpos\n"           // 2: fine
      "b\tpos \n"          // 3: trailing space
      "c\t\xff\xfe\n"      // 4: invalid UTF-8
      "sentence\tlabel\n"  // 5: the header again
      "d\tneg\n";          // 6: fine
  ReadOptions options;
  options.bad_rows = BadRowPolicy::kSkip;
  ExampleSet set = ParseOk(tsv, ExampleFormat::kTsv, options);
  ASSERT_EQ(set.examples.size(), 2u);
  const std::vector<std::string> expected = {
      "in:3: label 'pos ' in field 'label' has leading or trailing whitespace",
      "in:4: label in field 'label' is not valid UTF-8",
      "in:5: the header row again (files joined with their headers?)",
  };
  EXPECT_EQ(set.problems, expected);
  // Fatal with the default policy, in every format.
  for (const auto& [contents, format, needle] :
       std::vector<std::tuple<std::string, ExampleFormat, std::string>>{
           {tsv, ExampleFormat::kTsv, "t:3: label 'pos '"},
           {"text,label\na,b\ntext,label\n", ExampleFormat::kCsv,
            "t:3: the header row again"},
           {"{\"text\": \"a\", \"label\": \" b\"}\n", ExampleFormat::kJsonl,
            "t:1: label ' b'"}}) {
    auto fatal = ParseExamples(contents, "t", format, {});
    ASSERT_FALSE(fatal.ok()) << needle;
    EXPECT_NE(fatal.status().message().find(needle), std::string::npos)
        << fatal.status();
  }
}

// The finetune.*_column keys rename the columns of every format; a column
// that is not there is an error naming the file, the header line and it.
TEST(ReadOptionsFromConfigTest, ColumnRenamesOnTsvCsvAndJsonl) {
  auto config = ParseConfig(
      "", "c.yaml",
      {"finetune.text_column=review", "finetune.text_b_column=title",
       "finetune.label_column=stars", "finetune.id_column=rid"});
  ASSERT_TRUE(config.ok()) << config.status();
  auto options =
      ReadOptionsFromConfig(config->finetune, TaskKind::kClassification);
  ASSERT_TRUE(options.ok()) << options.status();
  const ExampleSet tsv = ParseOk(
      "rid\ttitle\treview\tstars\tsentence\tlabel\n"
      "r1\tGood\tI liked it\t5\tignored\t0\n",
      ExampleFormat::kTsv, *options);
  const ExampleSet csv =
      ParseOk("stars,review,title,rid\n5,I liked it,Good,r1\n",
              ExampleFormat::kCsv, *options);
  const ExampleSet jsonl = ParseOk(
      "{\"review\": \"I liked it\", \"title\": \"Good\", \"stars\": 5, "
      "\"rid\": \"r1\", \"label\": \"0\"}\n",
      ExampleFormat::kJsonl, *options);
  for (const ExampleSet* set : {&tsv, &csv, &jsonl}) {
    ASSERT_EQ(set->examples.size(), 1u);
    EXPECT_EQ(set->examples[0].text_a, "I liked it");
    EXPECT_EQ(set->examples[0].text_b, "Good");
    EXPECT_EQ(set->examples[0].label, "5");
    EXPECT_EQ(set->examples[0].id, "r1");
  }

  auto missing = ParseExamples("review\tscore\nok\t1\n", "m.tsv",
                               ExampleFormat::kTsv, *options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(
                "m.tsv:1 (header): no field 'title' among [review, score]"),
            std::string::npos)
      << missing.status();
  auto csv_missing = ParseExamples("review,title,rid\nok,t,1\n", "m.csv",
                                   ExampleFormat::kCsv, *options);
  ASSERT_FALSE(csv_missing.ok());
  EXPECT_NE(csv_missing.status().message().find(
                "m.csv:1 (header): no label field 'stars'"),
            std::string::npos)
      << csv_missing.status();
  // JSON Lines: a later object without the column is a bad row at its line.
  auto json_missing = ParseExamples(
      "{\"review\": \"a\", \"title\": \"b\", \"stars\": 1, \"rid\": \"x\"}\n"
      "{\"review\": \"a\", \"stars\": 1, \"rid\": \"y\"}\n",
      "m.jsonl", ExampleFormat::kJsonl, *options);
  ASSERT_FALSE(json_missing.ok());
  EXPECT_NE(
      json_missing.status().message().find("m.jsonl:2: missing field 'title'"),
      std::string::npos)
      << json_missing.status();

  // Only the first text named: a single-text task, even where a pair
  // would be detected.
  auto single = ParseConfig("", "c.yaml", {"finetune.text_column=sentence1"});
  ASSERT_TRUE(single.ok());
  options = ReadOptionsFromConfig(single->finetune, TaskKind::kClassification);
  ASSERT_TRUE(options.ok());
  const ExampleSet one = ParseOk("sentence1,sentence2,label\na,b,0\n",
                                 ExampleFormat::kCsv, *options);
  ASSERT_EQ(one.examples.size(), 1u);
  EXPECT_EQ(one.examples[0].text_b, "");
}

TEST(LabelSetTest, SortedNumericallyOrByBytes) {
  auto make = [](std::vector<std::string> labels) {
    std::vector<TextExample> ex(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) {
      ex[i].label = labels[i];
      ex[i].has_label = true;
    }
    return LabelSet::FromExamples(ex);
  };
  EXPECT_EQ(make({"10", "2", "0", "2"}).names(),
            (std::vector<std::string>{"0", "2", "10"}));
  LabelSet mnli = make({"neutral", "entailment", "contradiction"});
  EXPECT_EQ(mnli.names(), (std::vector<std::string>{"contradiction",
                                                    "entailment", "neutral"}));
  EXPECT_EQ(mnli.Id("neutral"), 2);
  EXPECT_EQ(mnli.Id("other"), -1);
  EXPECT_EQ(mnli.Name(1), "entailment");
  // "01" is not the integer 1's canonical spelling, so bytes order applies.
  EXPECT_EQ(make({"1", "01"}).names(), (std::vector<std::string>{"01", "1"}));

  EXPECT_FALSE(LabelSet::FromNames({"a", "a"}).ok());
  auto from_model = LabelSet::FromId2Label({{0, "neg"}, {1, "pos"}});
  ASSERT_TRUE(from_model.ok());
  EXPECT_EQ(from_model->Id("pos"), 1);
  EXPECT_FALSE(LabelSet::FromId2Label({{0, "neg"}, {2, "pos"}}).ok());
}

TEST(PackSequencePairTest, LayoutAndLeftPadding) {
  const PackedSequence p = PackSequencePair({10, 11, 12}, {20, 21}, 10);
  EXPECT_EQ(p.input_ids,
            (std::vector<int64_t>{5, 5, 10, 11, 12, 4, 20, 21, 4, 3}));
  EXPECT_EQ(p.token_type_ids,
            (std::vector<int64_t>{4, 4, 0, 0, 0, 0, 1, 1, 1, 2}));
  EXPECT_EQ(p.attention_mask,
            (std::vector<float>{0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_FALSE(p.truncated);

  const PackedSequence single = PackSequencePair({10, 11}, {}, 6);
  EXPECT_EQ(single.input_ids, (std::vector<int64_t>{5, 5, 10, 11, 4, 3}));
  EXPECT_EQ(single.token_type_ids, (std::vector<int64_t>{4, 4, 0, 0, 0, 2}));
}

TEST(PackSequencePairTest, TruncatesTheLongerOneTokenAtATime) {
  // Budget 7 - 3 = 4: A (6) shrinks while longer than B (2): 5, 4, 3, 2.
  PackedSequence p = PackSequencePair({10, 11, 12, 13, 14, 15}, {20, 21}, 7);
  EXPECT_EQ(p.input_ids, (std::vector<int64_t>{10, 11, 4, 20, 21, 4, 3}));
  EXPECT_TRUE(p.truncated);
  // Equal lengths shorten B first: (3,3) -> (3,2) -> (2,2).
  p = PackSequencePair({10, 11, 12}, {20, 21, 22}, 7);
  EXPECT_EQ(p.input_ids, (std::vector<int64_t>{10, 11, 4, 20, 21, 4, 3}));
  // A single text keeps its first max_seq_length - 2 tokens.
  p = PackSequencePair({10, 11, 12, 13, 14, 15}, {}, 5);
  EXPECT_EQ(p.input_ids, (std::vector<int64_t>{10, 11, 12, 4, 3}));
  EXPECT_TRUE(p.truncated);
}

TEST(EncodeExamplesTest, TensorsFromTheTokenizer) {
  const data::Tokenizer& tok = SmallTokenizer();
  ExampleSet set = ParseOk(
      "sentence1\tsentence2\tlabel\n"
      "The jury said it.\tThe city was happy.\tyes\n"
      "A much longer first sentence about the election and the "
      "county.\tShort.\tno\n",
      ExampleFormat::kTsv);
  LabelSet labels = LabelSet::FromExamples(set.examples);
  FeatureOptions options;
  options.max_seq_length = 16;
  auto enc = EncodeExamples(set.examples, tok, TaskKind::kClassification,
                            &labels, options);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids.sizes(), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(enc->input_ids.scalar_type(), torch::kInt64);
  EXPECT_EQ(enc->token_type_ids.scalar_type(), torch::kInt64);
  EXPECT_EQ(enc->attention_mask.scalar_type(), torch::kFloat32);
  EXPECT_EQ(enc->labels.scalar_type(), torch::kInt64);
  EXPECT_EQ(enc->labels[0].item<int64_t>(), 1);  // "yes" after "no"
  EXPECT_EQ(enc->labels[1].item<int64_t>(), 0);
  EXPECT_EQ(enc->example_ids, (std::vector<std::string>{"0", "1"}));

  std::vector<int32_t> a;
  std::vector<int32_t> b;
  ASSERT_TRUE(tok.EncodeIds(set.examples[0].text_a, &a).ok());
  ASSERT_TRUE(tok.EncodeIds(set.examples[0].text_b, &b).ok());
  const PackedSequence expected = PackSequencePair(a, b, 16);
  for (int64_t j = 0; j < 16; ++j) {
    EXPECT_EQ(enc->input_ids[0][j].item<int64_t>(), expected.input_ids[j]);
    EXPECT_EQ(enc->token_type_ids[0][j].item<int64_t>(),
              expected.token_type_ids[j]);
  }
  // Every row ends in <cls>; padding (if any) is on the left with id 5 and
  // segment 4, and the mask counts the real tokens.
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(enc->input_ids[r][15].item<int64_t>(), data::kClsId);
    EXPECT_EQ(enc->token_type_ids[r][15].item<int64_t>(), kSegCls);
    const int64_t real = enc->attention_mask[r].sum().item<float>();
    for (int64_t j = 0; j < 16 - real; ++j) {
      EXPECT_EQ(enc->input_ids[r][j].item<int64_t>(), data::kPadId);
      EXPECT_EQ(enc->token_type_ids[r][j].item<int64_t>(), kSegPad);
    }
  }
  // The long pair does not fit 16 and is cut; the short one fits when its
  // pieces do.
  EXPECT_EQ(enc->truncated, a.size() + b.size() > 13 ? 2 : 1);
  EXPECT_EQ(enc->attention_mask[1].sum().item<float>(), 16.0f);

  LabelSet other = *LabelSet::FromNames({"yes"});
  auto unknown = EncodeExamples(set.examples, tok, TaskKind::kClassification,
                                &other, options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("in:3: label 'no' is not in"),
            std::string::npos)
      << unknown.status();
}

TEST(EncodeExamplesTest, RegressionAndUnlabeled) {
  const data::Tokenizer& tok = SmallTokenizer();
  ReadOptions reg;
  reg.task = TaskKind::kRegression;
  ExampleSet set = ParseOk("text\tlabel\nsome words\t0.5\nmore words\t4\n",
                           ExampleFormat::kTsv, reg);
  auto enc =
      EncodeExamples(set.examples, tok, TaskKind::kRegression, nullptr, {});
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->labels.scalar_type(), torch::kFloat32);
  EXPECT_FLOAT_EQ(enc->labels[0].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(enc->labels[1].item<float>(), 4.0f);
  EXPECT_EQ(enc->input_ids.size(1), 128);

  ReadOptions unlabeled;
  unlabeled.require_label = false;
  ExampleSet test =
      ParseOk("{\"text\": \"some words\"}\n", ExampleFormat::kJsonl, unlabeled);
  auto pred = EncodeExamples(test.examples, tok, TaskKind::kClassification,
                             nullptr, {});
  ASSERT_TRUE(pred.ok()) << pred.status();
  EXPECT_FALSE(pred->labels.defined());
  EXPECT_EQ(pred->example_ids, (std::vector<std::string>{"0"}));
}

}  // namespace
}  // namespace xlnet::finetune
