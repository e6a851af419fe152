// Internal HDF5 adapter shared by the dump reader and writer: RAII handles, the library's
// one-time hardening (no error-stack printing, no dynamic filter plugins), error-stack text,
// datatype classification against docs/dump-format.md §1 and generic attribute reading.
// This is the only place (with the two .cc files that include it) where HDF5 types appear.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certify/io/dump_model.h"
#include "reference/status.h"

namespace ncert::certify::detail {

/// Owns an HDF5 identifier and closes it with the matching H5?close.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid(Hid&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  ~Hid() { reset(); }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

inline Hid own_file(hid_t id) { return Hid(id, H5Fclose); }
inline Hid own_group(hid_t id) { return Hid(id, H5Gclose); }
inline Hid own_dataset(hid_t id) { return Hid(id, H5Dclose); }
inline Hid own_space(hid_t id) { return Hid(id, H5Sclose); }
inline Hid own_type(hid_t id) { return Hid(id, H5Tclose); }
inline Hid own_plist(hid_t id) { return Hid(id, H5Pclose); }
inline Hid own_attr(hid_t id) { return Hid(id, H5Aclose); }
inline Hid own_object(hid_t id) { return Hid(id, H5Oclose); }

/// Turns off automatic error-stack printing and dynamic filter plugins (docs/dump-format.md §7).
/// Idempotent and thread-safe; every entry point of the adapter calls it.
void hdf5_init_once();

/// The current thread's HDF5 error stack, read once (every later HDF5 call clears it).
struct Hdf5Error {
  std::string text;            ///< innermost messages ("H5Fopen: unable to open file: ...")
  bool out_of_memory = false;  ///< an allocation inside libhdf5 failed (H5E_RESOURCE / H5E_CANTALLOC)
};

/// Reads and clears the current thread's HDF5 error stack.
Hdf5Error hdf5_error();

/// The innermost messages of the current thread's HDF5 error stack ("H5Fopen: unable to
/// open file: truncated file: eof = 1024, ..."), then clears the stack.
std::string hdf5_error_text();

/// The status for a failed HDF5 call, its stack as the detail (shown with --verbose).
/// Status(code, what) says what is wrong in the dump's terms, not which library function
/// failed. When libhdf5 failed because an allocation did (the address-space limit
/// --max-memory sets, docs/cli.md), the status is memory-limit, never the corrupt-file
/// `code`: a valid file that needs more memory than allowed is not a damaged one.
Status hdf5_failure(ErrorCode code, const std::string& what);
Status hdf5_failure(ErrorCode code, const std::string& what, const Hdf5Error& error);

/// A link-access property list whose external-link callback refuses every traversal, so no
/// open through an external link can ever reach another file.
Hid make_safe_lapl();

/// What a datatype is, against docs/dump-format.md §1.
struct TypeClass {
  bool allowed = false;  ///< one of the element types the format accepts
  DType dtype = DType::kF32;
  bool is_u16 = false;      ///< uint16: bf16 only together with the attribute dtype = "bf16"
  std::string description;  ///< human description, for errors ("IEEE f64 little-endian")
};
TypeClass classify_type(hid_t type);

/// The HDF5 datatype ncert writes for a DType (bf16 as the custom float of docs/formats.md "HDF5 storage"
/// when `bf16_as_float` is true, else as uint16). Caller owns the result.
Hid make_file_type(DType t, bool bf16_as_float);

/// The attribute bytes one file's survey reads in all, at most. An attribute's value can be
/// shared: every string of a variable-length string attribute may point at one heap object, and
/// a shared attribute message serves many objects; each is read again each time. A 1.3 MB file
/// whose 2,048 strings all point at one 1 MiB heap object read 2 GiB per attribute, and 64 such
/// attributes took 149 s (a review's).
struct AttributeBudget {
  std::uint64_t limit = 0;
  std::uint64_t used = 0;
};
/// The budget of a file of `file_size` bytes: 64 MiB, or twice the file where that is more
/// (the format's own attributes are a few hundred bytes an object).
AttributeBudget attribute_budget(std::uint64_t file_size);

/// Reads every attribute of an object, sorted by name. Attributes larger than 1 MiB or of
/// unsupported types come back as Kind::kOther with their type described (never read), and so
/// do variable-length string attributes of more than one string (every string attribute of the
/// format is a scalar). With a budget, each value read is charged to it, and an attribute that
/// takes it past its limit refuses the object (storage-bomb, naming the attribute).
Result<std::vector<AttributeInfo>> read_attributes(hid_t obj, AttributeBudget* budget = nullptr);

}  // namespace ncert::certify::detail
