// The "toy_badpad" test plugin: the toy with a wrong padding choice, the case
// `encgraph verify` must catch. cu_seqlens is declared EG_PAD_ZERO where the
// forward needs EG_PAD_REPEAT_LAST: each row finds its sequence by a search
// that assumes the offsets never decrease, so in a padded replay every item but
// the first starts at row 0 and its rows come out silently wrong, while an item
// run alone (nothing before it to confuse) is right. Included by
// plugins/toy/toy_plugin.cpp (TOY_EXTENSION); built by tests/plugins, never installed.
#pragma once

struct Extension : ExtensionDefaults {
  static constexpr int32_t kCuSeqlensPadding = EG_PAD_ZERO;
  static constexpr bool kRowsSearchSequence = true;
};
