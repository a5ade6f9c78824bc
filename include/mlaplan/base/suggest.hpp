#pragma once
// "Did you mean": the names a mistyped word most likely meant. Every suggestion mla-plan makes
// goes through suggest(): subcommands, flags, flag values (kv-cache dtypes, attention backends,
// formats, decode modes, ...) and GPU presets (docs/cli.md, "Flag values").

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan {

/// At most this many names are suggested; when more are equally near, none is (the word says too
/// little to choose, and the message lists the allowed names anyway).
inline constexpr std::size_t kMaxSuggestions = 3;
/// A word longer than this gets no suggestion (nothing in mla-plan's sets is half as long).
inline constexpr std::size_t kMaxSuggestWordBytes = 128;

/// How a word is matched against a set of names.
struct SuggestRules {
  /// Substring matches (tiers 3 and 5 of suggest()): on for values and flags, off for commands,
  /// where a word that merely contains "plan" is more likely a file name than a command.
  bool substrings = true;
  /// A word shorter than this (in bytes) gets no suggestion.
  std::size_t min_length = 1;
};

/// The Damerau-Levenshtein distance of `a` and `b` in its optimal-string-alignment form: the
/// fewest insertions, deletions and substitutions of one byte and transpositions of two adjacent
/// bytes that turn one into the other ("plna" -> "plan" is 1, "chek" -> "check" 1). ASCII letters
/// compare ignoring case when `ignore_case`.
std::size_t edit_distance(std::string_view a, std::string_view b, bool ignore_case = false);

/// The names of `names` that `word` most likely meant, from the first of these tiers that has
/// any (ASCII case ignored throughout; names keep their own spelling):
///   1. the name equal to it ("FP8" -> fp8);
///   2. the names it begins ("nvfp4" -> nvfp4_ds_mla), shortest first;
///   3. (substrings) the names it lies inside, for a word of at least 3 bytes ("e5m2" ->
///      fp8_e5m2), shortest first;
///   4. the names within max(1, min(3, length / 4)) edits (edit_distance()), the nearest ones
///      ("plna" -> plan, "jsn" -> json): a typo, not another word ("batch-size" is 3 edits
///      from block-size);
///   5. (substrings) the longest names of at least 3 bytes that lie inside it ("h200-sxm" -> h200,
///      "batch-size" -> batch).
/// The tier's names in `names` order within each length or distance; none when more than
/// kMaxSuggestions are equally good (then no later tier is tried), when the word is empty,
/// shorter than `rules.min_length` or longer than kMaxSuggestWordBytes.
std::vector<std::string> suggest(std::string_view word, const std::vector<std::string>& names,
                                 const SuggestRules& rules = {});

/// "did you mean 'a'?", "did you mean 'a' or 'b'?", "did you mean 'a', 'b' or 'c'?"; "" for none.
/// The names are mla-plan's own (never the input), so they are quoted as they are.
std::string did_you_mean(const std::vector<std::string>& suggestions);

/// "; did you mean ...?" for suggest(word, names), or "" when there is none: the end of a
/// "'x' is not allowed; allowed: a, b, c" message.
std::string did_you_mean_suffix(std::string_view word, const std::vector<std::string>& names,
                                const SuggestRules& rules = {});

}  // namespace mlaplan
