/* In-order agreement of two symbol sequences, for accuracy measures.
 *
 * seq_lcs is exact: a longest common subsequence, bit-parallel, in time
 * proportional to the product of the lengths over 64. It measures a fill
 * against its hole (ptdecode stats: RA), a few million bytecodes at most.
 *
 * seq_aligned is linear for sequences that mostly agree, for whole runs of
 * tens of millions (tests/flow: sequence agreement), where the product is
 * out of reach. It walks both sequences together; at a difference it
 * resynchronizes at the nearest place (fewest symbols skipped on both sides)
 * where the next SEQ_RESYNC_GRAM symbols agree: first with each side at most
 * SEQ_RESYNC_WINDOW ahead, else with one side that far and the other any
 * distance (a loop that ran thousands of bytecodes longer in one sequence
 * than in the other), and when nothing recurs at all it skips that window on
 * both sides. The symbols it counts form a common subsequence, so it never
 * counts more than seq_lcs; where two sequences run the same loop with its
 * iterations in other orders, the nearest resynchronization often skips
 * iterations that would have matched, and it counts much less (a luindex
 * fill of Properties$LineReader.readLine: 67,848 against 181,380). */
#ifndef JPT_COMMON_SEQALIGN_H
#define JPT_COMMON_SEQALIGN_H

#include <stddef.h>
#include <stdint.h>

#define SEQ_RESYNC_GRAM 8
#define SEQ_RESYNC_WINDOW 4096

/* Symbols of a matched to b; when matched is not NULL, matched[i] is set to
 * 1 for each symbol of a that is (and 0 for the others). */
uint64_t seq_aligned(const uint64_t *a, size_t n, const uint64_t *b, size_t m, uint8_t *matched);

/* The length of a longest common subsequence of a and b, exactly: the most
 * symbols of a that can be matched to b in order. Bit-parallel over b
 * (Allison-Dix, Hyyro), in strips of b's positions so that memory stays
 * linear: O(n * m / 64) time. For sequences of up to a few million symbols
 * each (a hole and its fill); seq_aligned is for whole runs that mostly
 * agree. When gained is not NULL, gained[i] is set to 1 where a's prefix
 * through symbol i has a longer common subsequence with b than the prefix
 * before it (and 0 elsewhere): the 1s add up to the length, and those in
 * any stretch of a add up to what that stretch adds to its prefix's. They
 * need not themselves form a common subsequence. */
uint64_t seq_lcs(const uint64_t *a, size_t n, const uint64_t *b, size_t m, uint8_t *gained);

#endif
