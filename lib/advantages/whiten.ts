/**
 * Batch whitening over masked tokens (`mask.whiten`), as verl's `masked_whiten`: with μ and σ² the
 * mean and Bessel-corrected variance of the advantages over every masked token of the batch,
 * A ← (A − μ) / sqrt(σ² + 1e-8). Tokens outside the mask stay 0 (verl shifts them too; they carry no
 * loss either way). Fewer than two masked tokens: left unchanged (verl raises).
 *
 * @module
 */

/** Whitens `adv` in place over the tokens where `mask` is 1. */
export function whitenMasked(adv: Float32Array, mask: Uint8Array): void {
  let n = 0;
  let sum = 0;
  for (let t = 0; t < adv.length; t++) {
    if (mask[t]) {
      n++;
      sum += adv[t];
    }
  }
  if (n < 2) return;
  const mean = sum / n;
  let ss = 0;
  for (let t = 0; t < adv.length; t++) if (mask[t]) ss += (adv[t] - mean) ** 2;
  const inv = 1 / Math.sqrt(ss / (n - 1) + 1e-8);
  for (let t = 0; t < adv.length; t++) if (mask[t]) adv[t] = (adv[t] - mean) * inv;
}
