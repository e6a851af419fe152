// The error-code table: one NCERT_ERROR_CODE(enumerator, number, name, exit, description) row per
// code, in numeric order. It is the one source of ncert's error vocabulary: reference/status.h
// includes it to declare ErrorCode, reference/status.cc to name and describe each code and map it
// to an exit code, and ncert-docgen writes the copies outside C++ from it (the table in
// docs/error-codes.md, the code/name pairs of docs/report.schema.json, ERROR_CODES in
// python/ncert_dump/errors.py). It is not a header of its own: define NCERT_ERROR_CODE, include
// it, undefine the macro.
//
// Numbers never change once released and a released name keeps its meaning (docs/cli.md); a new
// code takes a new number in its band. The name is the enumerator without its k, in kebab case
// (kGuardDuplicateRow -> guard-duplicate-row). exit is what exit_code_for() returns (docs/cli.md):
// 2 usage, 3 input refused, 4 internal, 5 report not written, 130 interrupted. status.cc checks
// the rows at compile time (numbers rising, names unique and matching their enumerators, exits
// from that list; reference/detail/error_table.h). To add a code: add its row here, build, then
// run `ncert-docgen write .` at the source root.
//
// No include guard: the file is meant to be included once per expansion of the macro. Included
// without the macro (an installed-headers check compiles every header alone), it includes the
// vocabulary it feeds, reference/status.h, and expands nothing itself.

#ifndef NCERT_ERROR_CODE
#include "reference/status.h"
#else

NCERT_ERROR_CODE(kOk, 0, "ok", 0, "no error")

// 1xx: input and command line. Exit 2 (usage), except file-not-found and not-regular-file (3)
// and interrupted (128 + the signal; 130 is SIGINT's).
NCERT_ERROR_CODE(kUsage, 100, "usage", 2, "bad command-line flags or arguments")
NCERT_ERROR_CODE(kInvalidArgument, 101, "invalid-argument", 2,
                 "a library call got an argument outside its documented range")
NCERT_ERROR_CODE(kOutputExists, 102, "output-exists", 2,
                 "refusing to overwrite an existing file (a report replaces only an empty file or a report, "
                 "a campaign journal only an empty file or a journal)")
NCERT_ERROR_CODE(kFileNotFound, 103, "file-not-found", 3, "an input path does not exist")
NCERT_ERROR_CODE(kInterrupted, 104, "interrupted", 130, "stopped by SIGINT or SIGTERM (exit 128 + signal)")
NCERT_ERROR_CODE(kPathConflict, 105, "path-conflict", 2,
                 "an output is the same file as an input or another output (it would replace it)")
NCERT_ERROR_CODE(kNotRegularFile, 106, "not-regular-file", 3,
                 "an input is a FIFO, socket, device or directory; refused without reading it")
NCERT_ERROR_CODE(kSkipPolicyInvalid, 107, "skip-policy-invalid", 2,
                 "a skip policy file (--policy) is missing, not JSON, or has an unknown key, kind or malformed rule")

// 2xx: I/O, HDF5 and dump schema. Exit 3 (input refused), except report-write (5).
NCERT_ERROR_CODE(kIo, 200, "io", 3, "the operating system failed a read, write, map or stat")
NCERT_ERROR_CODE(kNotHdf5, 201, "not-hdf5", 3, "the file is not an HDF5 file (or is truncated before its superblock)")
NCERT_ERROR_CODE(kHdf5, 202, "hdf5", 3, "the HDF5 library failed (corrupt or truncated file); message has its error")
NCERT_ERROR_CODE(kHdf5Crashed, 203, "hdf5-crashed", 3,
                 "the HDF5 library crashed reading the file (isolated: the file is corrupt)")
NCERT_ERROR_CODE(kHdf5Hung, 204, "hdf5-hung", 3, "the HDF5 library made no progress within the watchdog's time")
NCERT_ERROR_CODE(kReportWrite, 205, "report-write", 5,
                 "the report could not be written (exit 5 unless the verdict is FAIL)")
NCERT_ERROR_CODE(kExternalLink, 210, "external-link", 3, "an external link; refused without opening its target")
NCERT_ERROR_CODE(kExternalStorage, 211, "external-storage", 3, "a dataset whose raw data lives in external files")
NCERT_ERROR_CODE(kVirtualDataset, 212, "virtual-dataset", 3,
                 "a virtual dataset (VDS); a missing source would read as zeros")
NCERT_ERROR_CODE(kFilterRefused, 213, "filter-refused", 3, "a filter outside deflate/shuffle/fletcher32")
NCERT_ERROR_CODE(kLayoutRefused, 214, "layout-refused", 3, "a storage layout other than contiguous, compact or chunked")
NCERT_ERROR_CODE(kLinkRefused, 215, "link-refused", 3, "a user-defined or dangling link")
NCERT_ERROR_CODE(kObjectAliased, 216, "object-aliased", 3, "two names (hard links) for one HDF5 object")
NCERT_ERROR_CODE(kTreeLimit, 217, "tree-limit", 3, "the group tree is deeper or has more objects than the limits")
NCERT_ERROR_CODE(kStorageBomb, 218, "storage-bomb", 3,
                 "a dataset declares far more data than the file stores or can expand to, or attributes read far more "
                 "than the file stores")
NCERT_ERROR_CODE(kTrailingData, 219, "trailing-data", 3,
                 "the file extends over 1 MiB past its HDF5 end-of-file address (a sparse hole or appended bytes)")
NCERT_ERROR_CODE(kDatatypeRefused, 220, "datatype-refused", 3, "a datatype the format does not allow for that object")
NCERT_ERROR_CODE(kMissingAttribute, 221, "missing-attribute", 3, "a required attribute is absent")
NCERT_ERROR_CODE(kAttributeInvalid, 222, "attribute-invalid", 3, "an attribute has the wrong type or an invalid value")
NCERT_ERROR_CODE(kMissingMember, 223, "missing-member", 3, "a required dataset or group is absent")
NCERT_ERROR_CODE(kShapeMismatch, 224, "shape-mismatch", 3,
                 "a dataset's shape disagrees with the attributes or other datasets")
NCERT_ERROR_CODE(kSizeOverflow, 225, "size-overflow", 3, "dims whose element or byte count overflows 64 bits")
NCERT_ERROR_CODE(kMemoryLimit, 226, "memory-limit", 3, "a read would exceed the configured memory limit")
NCERT_ERROR_CODE(kSchemaUnknown, 227, "schema-unknown", 3, "the root does not declare ncert_schema = \"ncert-dump\"")
NCERT_ERROR_CODE(kSchemaVersion, 228, "schema-version", 3, "an ncert_schema_version this build does not know")
NCERT_ERROR_CODE(kShapeLimit, 229, "shape-limit", 3,
                 "a shape attribute (k, n, a stride, vocab, a group size...) above 2^32 - 1")
NCERT_ERROR_CODE(kVocabMismatch, 230, "vocab-mismatch", 3, "two runs to compare have different vocabularies")
NCERT_ERROR_CODE(kNoCommonRuns, 231, "no-common-runs", 3, "two dumps share no run or tensor to compare")
NCERT_ERROR_CODE(kWitnessFileInvalid, 232, "witness-file-invalid", 3, "a witness file is not one ncert wrote")
NCERT_ERROR_CODE(kVocabFileInvalid, 233, "vocab-file-invalid", 3,
                 "a --vocab file is neither a JSON list of strings nor a tokenizer.json")
NCERT_ERROR_CODE(kChunkBomb, 234, "chunk-bomb", 3,
                 "a chunked dataset of over 65,536 chunks under 1 KiB each (its index outweighs its data), or a chunk "
                 "over 256 MiB larger than its whole dataset")
NCERT_ERROR_CODE(kInputChanged, 235, "input-changed", 3, "an input file was replaced or shortened while ncert read it")

// 3xx: packing host guards. Exit 3; in `ncert check` a guard trip is a FAIL of the geometry check.
NCERT_ERROR_CODE(kGuardRowOutOfRange, 300, "guard-row-out-of-range", 3, "a selector row is not in [0, M) (or is < -1)")
NCERT_ERROR_CODE(kGuardDuplicateRow, 301, "guard-duplicate-row", 3, "two physical slots select the same original row")
NCERT_ERROR_CODE(kGuardCapExceeded, 302, "guard-cap-exceeded", 3, "a request gathers more rows than cap")
NCERT_ERROR_CODE(kGuardNotPrefix, 303, "guard-not-prefix", 3, "a request's selected rows are not its first c rows")
NCERT_ERROR_CODE(kGuardCommitMismatch, 304, "guard-commit-mismatch", 3, "commit_counts disagree with the selector")
NCERT_ERROR_CODE(kGuardTooFewSlots, 305, "guard-too-few-slots", 3,
                 "the committed rows do not fit in the P physical slots")
NCERT_ERROR_CODE(kGuardStrideBelowWidth, 306, "guard-stride-below-width", 3,
                 "a row stride is smaller than the valid width")
NCERT_ERROR_CODE(kGuardExtentTooSmall, 307, "guard-extent-too-small", 3,
                 "a buffer or scratch is shorter than its geometry needs")
NCERT_ERROR_CODE(kGuardSegmentTable, 308, "guard-segment-table", 3,
                 "weight segments leave gaps, overlap or miss the total N")
NCERT_ERROR_CODE(kGuardAf4Geometry, 309, "guard-af4-geometry", 3,
                 "a group size (AF4, scaled, x_quant_group) does not divide K, or codes/scales shapes wrong")
NCERT_ERROR_CODE(kGuardUnsupported, 310, "guard-unsupported", 3,
                 "a format/epilogue/output combination the helper cannot run")
NCERT_ERROR_CODE(kGuardPartialOverlap, 311, "guard-partial-overlap", 3,
                 "two buffers overlap without being the same buffer")
NCERT_ERROR_CODE(kGuardOutputAliasesInput, 312, "guard-output-aliases-input", 3,
                 "the output buffer overlaps the input X")
NCERT_ERROR_CODE(kGuardMisaligned, 313, "guard-misaligned", 3, "a buffer base address is not aligned for the kernel")
NCERT_ERROR_CODE(kGuardWalkSplit, 314, "guard-walk-split", 3,
                 "k_walk split:<P> or splitk:<S>:... with K not a multiple of P or S; codes:<C>:... with K not a "
                 "multiple of C, or K / C not a multiple of the parts")
NCERT_ERROR_CODE(kGuardPlanShape, 315, "guard-plan-shape", 3,
                 "R, B, cap or P outside the helper's limits or inconsistent")
NCERT_ERROR_CODE(kGuardCapacity, 316, "guard-capacity", 3, "no compiled width bucket can hold the prompt")
NCERT_ERROR_CODE(kGuardCanaryClobbered, 317, "guard-canary-clobbered", 3,
                 "a canary byte around a buffer changed (out-of-bounds write)")

// 4xx: numeric formats and descriptors. Exit 3.
NCERT_ERROR_CODE(kFormatUnknown, 400, "format-unknown", 3,
                 "a weight segment format other than af4, bf16, f32, f16, int8, e4m3, e5m2")
NCERT_ERROR_CODE(kAf4VariantUnknown, 401, "af4-variant-unknown", 3,
                 "AF4 variant other than affine, codebook, zero-point")
NCERT_ERROR_CODE(kAf4CodebookUnknown, 402, "af4-codebook-unknown", 3, "AF4 codebook other than nf4, af4-64, custom")
NCERT_ERROR_CODE(kAf4PackingUnknown, 403, "af4-packing-unknown", 3,
                 "AF4 packing other than u32-lsb, u8-msb, u8-lsb (zero_point_packing: other than u8 or those)")
NCERT_ERROR_CODE(kAf4DequantUnknown, 404, "af4-dequant-unknown", 3, "AF4 dequant other than exact, f32, output, folded")
NCERT_ERROR_CODE(kAccumulatorUnknown, 405, "accumulator-unknown", 3,
                 "accumulator other than f32-rn, f32-rz, matrix-unit, u=<x>")
NCERT_ERROR_CODE(kKWalkInvalid, 406, "k-walk-invalid", 3,
                 "k_walk not one of the forms of docs/dump-format.md §3.4 (seq, seq-fma, split, lanes with a seq, "
                 "halving, pairs, butterfly(...) or groups(...) tree, promote, splitk, codes)")
NCERT_ERROR_CODE(kEpilogueUnknown, 407, "epilogue-unknown", 3,
                 "epilogue other than none, bias, residual, bias+residual (or bias_at other than end, start)")
NCERT_ERROR_CODE(kOutputDtypeUnknown, 408, "output-dtype-unknown", 3,
                 "output_dtype other than f32, bf16, f16 (or residual_at invalid)")
NCERT_ERROR_CODE(kPolicyInvalid, 409, "policy-invalid", 3, "a comparison policy string that does not parse")
NCERT_ERROR_CODE(kOutputRoundingUnknown, 410, "output-rounding-unknown", 3, "output_rounding other than rne, rz, any")
NCERT_ERROR_CODE(kDequantOpUnknown, 411, "dequant-op-unknown", 3,
                 "AF4 dequant_op other than fma, mul-add, either (zero-point: other than sub-mul, fused)")
NCERT_ERROR_CODE(kXQuantUnknown, 412, "x-quant-unknown", 3,
                 "x_quant other than int8, uint8, e4m3, e5m2, or x_quant_rounding other than rne, rna")

// 9xx: internal. Exit 4 (a bug in ncert).
NCERT_ERROR_CODE(kInternal, 900, "internal", 4, "a bug in ncert: an invariant failed")

#endif  // NCERT_ERROR_CODE
