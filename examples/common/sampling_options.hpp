// The DRY and XTC sampler options smol-generate and smol-chat share (their
// values are checked by Sampler::validate when generation starts).
#pragma once

#include <smol/smol.hpp>

#include "cli.hpp"

namespace smol_examples {

inline void add_dry_xtc_options(smol_cli::Parser& cli, smol::SamplingParams& params) {
    cli.option("--dry-multiplier", params.dry_multiplier, "X",
               "DRY: penalize tokens that extend a repeated sequence (default 0: off;\n"
               "0.8 is a common choice)");
    cli.option("--dry-base", params.dry_base, "B",
               "DRY: the penalty grows as B^(length - allowed length) (default 1.75)");
    cli.option("--dry-allowed-length", params.dry_allowed_length, "N",
               "DRY: repeats of up to N tokens go unpenalized (default 2)")
        .at_least(1);
    cli.option("--dry-penalty-last-n", params.dry_penalty_last_n, "N",
               "DRY: look back N tokens (default -1: the whole context; 0: off)")
        .at_least(-1);
    cli.option("--xtc-probability", params.xtc_probability, "P",
               "XTC: with probability P, drop the most likely tokens but the least likely\n"
               "of those above the threshold (default 0: off)");
    cli.option("--xtc-threshold", params.xtc_threshold, "T",
               "XTC: the probability a token needs to be dropped (default 0.1; > 0.5: off)");
}

}  // namespace smol_examples
