// A rule-based sentence splitter for text that does not come one sentence a
// line (JSON Lines records), so the A/B segments of a sample stay sentences.
//
// The rule. Line breaks always end a sentence. Within a line, a sentence
// ends after a run of terminators (. ! ?, also … and the fullwidth ．！？),
// optionally followed by closing quotes or brackets (" ' ” ’ » ) ]), when
// whitespace follows and the next character starts a sentence: an
// uppercase letter (Unicode), a digit, or an opening quote or bracket
// (" ' “ ‘ « ( [). A terminator run that is a single "." does not end a
// sentence after
//   - a common abbreviation (Mr Mrs Ms Dr Prof St Jr Sr Gen Gov Sen Rep Rev
//     Col Capt Lt Sgt Mt Fig No vs etc Inc Ltd Co Corp Jan Feb ... Dec,
//     compared case-sensitively, see kAbbreviations in the .cc),
//   - a single letter ("J. Smith", "U. S."), or
//   - a word with a period inside ("U.S.", "e.g.", "a.m.").
// Sentences are stripped of surrounding whitespace; empty ones are dropped.
// This is deliberately simple (no statistics, no language models): it keeps
// "Mr. Smith went to Washington. He left." as two sentences and errs
// towards not splitting.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace xlnet::data {

// Appends the sentences of `text` (UTF-8; invalid bytes are kept as they
// are) to `out`, as views into `text`.
void SplitSentences(std::string_view text, std::vector<std::string_view>* out);

}  // namespace xlnet::data
