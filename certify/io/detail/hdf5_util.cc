#include "certify/io/detail/hdf5_util.h"

#include <H5PLpublic.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>

namespace ncert::certify::detail {

using certify::AttrValue;

void hdf5_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    H5open();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    // No dynamic filter plugins: a hostile file could otherwise name a filter id whose plugin
    // happens to be installed (HDF5_PLUGIN_PATH) and run its code on our process.
    H5PLset_loading_state(0);
  });
}

namespace {

struct ErrorWalk {
  std::vector<std::string> lines;
  bool out_of_memory = false;
};

herr_t collect_error(unsigned n, const H5E_error2_t* err, void* data) {
  auto* walk = static_cast<ErrorWalk*>(data);
  if (err != nullptr && (err->maj_num == H5E_RESOURCE || err->min_num == H5E_CANTALLOC || err->min_num == H5E_NOSPACE))
    walk->out_of_memory = true;
  if (n < 4 && err != nullptr) {
    std::string line = err->func_name ? err->func_name : "?";
    line += ": ";
    line += err->desc ? err->desc : "";
    walk->lines.push_back(line);
  }
  return 0;
}

}  // namespace

Hdf5Error hdf5_error() {
  ErrorWalk walk;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &walk);
  H5Eclear2(H5E_DEFAULT);
  Hdf5Error e;
  e.out_of_memory = walk.out_of_memory;
  if (walk.lines.empty()) e.text = "HDF5 reported no detail";
  for (const std::string& l : walk.lines) {
    if (!e.text.empty()) e.text += "; ";
    e.text += l;
  }
  return e;
}

std::string hdf5_error_text() { return hdf5_error().text; }

Status hdf5_failure(ErrorCode code, const std::string& what, const Hdf5Error& error) {
  if (error.out_of_memory) {
    return Status(ErrorCode::kMemoryLimit, what +
                                               ": libhdf5 could not allocate the memory it needs within the "
                                               "--max-memory budget")
        .with_detail("HDF5 error stack: " + error.text);
  }
  return Status(code, what).with_detail("HDF5 error stack: " + error.text);
}

Status hdf5_failure(ErrorCode code, const std::string& what) { return hdf5_failure(code, what, hdf5_error()); }

namespace {
herr_t refuse_elink(const char*, const char*, const char*, const char*, unsigned*, hid_t, void*) { return -1; }
}  // namespace

Hid make_safe_lapl() {
  hdf5_init_once();
  Hid lapl = own_plist(H5Pcreate(H5P_LINK_ACCESS));
  H5Pset_elink_cb(lapl.get(), refuse_elink, nullptr);
  return lapl;
}

namespace {

std::string float_description(hid_t type) {
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
  std::ostringstream os;
  os << H5Tget_size(type) * 8 << "-bit float (sign@" << spos << ", exp@" << epos << "x" << esize << ", mant@" << mpos
     << "x" << msize << ", bias " << H5Tget_ebias(type) << ", "
     << (H5Tget_order(type) == H5T_ORDER_BE ? "big" : "little") << "-endian)";
  return os.str();
}

}  // namespace

TypeClass classify_type(hid_t type) {
  TypeClass tc;
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  const H5T_order_t order = H5Tget_order(type);
  if (cls == H5T_FLOAT) {
    tc.description = float_description(type);
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    const size_t ebias = H5Tget_ebias(type);
    const bool le = order == H5T_ORDER_LE;
    const bool plain =
        H5Tget_offset(type) == 0 && H5Tget_norm(type) == H5T_NORM_IMPLIED && H5Tget_precision(type) == size * 8;
    if (le && plain && size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 &&
        ebias == 127) {
      tc.allowed = true;
      tc.dtype = DType::kF32;
    } else if (le && plain && size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 &&
               ebias == 15) {
      tc.allowed = true;
      tc.dtype = DType::kF16;
    } else if (le && plain && size == 2 && spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 &&
               ebias == 127) {
      tc.allowed = true;
      tc.dtype = DType::kBf16;
    }
    return tc;
  }
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    std::ostringstream os;
    os << (is_signed ? "int" : "uint") << size * 8 << " " << (order == H5T_ORDER_BE ? "big" : "little") << "-endian";
    tc.description = os.str();
    if (order != H5T_ORDER_LE || H5Tget_precision(type) != size * 8) return tc;
    if (is_signed && size == 1) tc = {true, DType::kI8, false, tc.description};
    if (!is_signed && size == 1) tc = {true, DType::kU8, false, tc.description};
    if (!is_signed && size == 2) tc = {false, DType::kBf16, true, tc.description};
    if (!is_signed && size == 4) tc = {true, DType::kU32, false, tc.description};
    if (is_signed && size == 4) tc = {true, DType::kI32, false, tc.description};
    if (is_signed && size == 8) tc = {true, DType::kI64, false, tc.description};
    return tc;
  }
  switch (cls) {
    case H5T_STRING:
      tc.description = "string";
      break;
    case H5T_OPAQUE:
      tc.description = "opaque";
      break;
    case H5T_COMPOUND:
      tc.description = "compound";
      break;
    case H5T_REFERENCE:
      tc.description = "reference";
      break;
    case H5T_ENUM:
      tc.description = "enum";
      break;
    case H5T_VLEN:
      tc.description = "variable-length sequence";
      break;
    case H5T_ARRAY:
      tc.description = "array";
      break;
    case H5T_BITFIELD:
      tc.description = "bitfield";
      break;
    case H5T_TIME:
      tc.description = "time";
      break;
    default:
      tc.description = "unknown class";
      break;
  }
  return tc;
}

Hid make_file_type(DType t, bool bf16_as_float) {
  hdf5_init_once();
  switch (t) {
    case DType::kF32:
      return own_type(H5Tcopy(H5T_IEEE_F32LE));
    case DType::kU8:
    case DType::kE4m3:  // raw patterns, tagged with the attribute dtype by the writer
    case DType::kE5m2:
      return own_type(H5Tcopy(H5T_STD_U8LE));
    case DType::kI8:
      return own_type(H5Tcopy(H5T_STD_I8LE));
    case DType::kU32:
      return own_type(H5Tcopy(H5T_STD_U32LE));
    case DType::kI32:
      return own_type(H5Tcopy(H5T_STD_I32LE));
    case DType::kI64:
      return own_type(H5Tcopy(H5T_STD_I64LE));
    case DType::kF16: {
      // IEEE binary16. Fields first, then the size (docs/formats.md "HDF5 storage": H5Tset_size refuses
      // to shrink below the fields otherwise).
      Hid ty = own_type(H5Tcopy(H5T_IEEE_F32LE));
      H5Tset_fields(ty.get(), 15, 10, 5, 0, 10);
      H5Tset_size(ty.get(), 2);
      H5Tset_ebias(ty.get(), 15);
      return ty;
    }
    case DType::kBf16: {
      if (!bf16_as_float) return own_type(H5Tcopy(H5T_STD_U16LE));
      Hid ty = own_type(H5Tcopy(H5T_IEEE_F32LE));
      H5Tset_fields(ty.get(), 15, 7, 8, 0, 7);
      H5Tset_size(ty.get(), 2);
      H5Tset_ebias(ty.get(), 127);
      return ty;
    }
  }
  return Hid();
}

namespace {

constexpr hsize_t kMaxAttrElements = 1 << 16;
constexpr size_t kMaxAttrBytes = 1 << 20;

/// One stored string: a NUL followed only by NULs ends it (padding), a NUL followed by more text
/// is an embedded NUL (reading up to it would accept "linear\0evil" as "linear"), refused.
Status stored_string(std::string s, bool space_padded, const char* name, AttrValue& v) {
  const auto nul = s.find('\0');
  if (nul != std::string::npos && s.find_first_not_of('\0', nul) != std::string::npos) {
    return Status(ErrorCode::kAttributeInvalid,
                  std::string("attribute ") + name + ": a string with an embedded NUL byte at offset " +
                      std::to_string(nul) + " (text follows it); refused, it would read as \"" + s.substr(0, nul) +
                      "\"");
  }
  if (nul != std::string::npos) s.resize(nul);
  // Space-padded fixed strings (H5T_STR_SPACEPAD) are trimmed.
  while (space_padded && !s.empty() && s.back() == ' ') s.pop_back();
  v.strings.push_back(std::move(s));
  return Status();
}

/// The n strings of a variable-length string attribute, each with the length it is stored with.
/// They are read as sequences of bytes (hvl_t), not as C strings: a C string would end at an
/// embedded NUL, and its 16-byte descriptor says nothing of the bytes behind it. Over
/// kMaxAttrBytes in all, the attribute is oversized as a fixed-length one would be.
Status read_variable_strings(hid_t attr, hid_t space, size_t n, const char* name, AttrValue& v, std::uint64_t& held) {
  Hid mem = own_type(H5Tvlen_create(H5T_NATIVE_UCHAR));
  std::vector<hvl_t> seqs(n, hvl_t{0, nullptr});
  if (!mem.valid() || H5Aread(attr, mem.get(), seqs.data()) < 0) {
    return hdf5_failure(ErrorCode::kHdf5, std::string("cannot read attribute ") + name);
  }
  struct Reclaim {
    hid_t type, space;
    std::vector<hvl_t>* seqs;
    ~Reclaim() { H5Dvlen_reclaim(type, space, H5P_DEFAULT, seqs->data()); }
  } reclaim{mem.get(), space, &seqs};
  size_t total = 0;
  for (const hvl_t& q : seqs) total += q.len;
  held = total;
  if (total > kMaxAttrBytes) {
    v.kind = AttrValue::Kind::kOther;
    v.type_description = "oversized: " + std::to_string(total) + " bytes";
    v.strings.clear();
    return Status();
  }
  for (const hvl_t& q : seqs) {
    std::string s = q.p ? std::string(static_cast<const char*>(q.p), q.len) : std::string();
    NCERT_RETURN_IF_ERROR(stored_string(std::move(s), false, name, v));
  }
  return Status();
}

/// The n strings of a string attribute, variable or fixed length; refuses an embedded NUL.
Status read_string_values(hid_t attr, hid_t type, hid_t space, size_t size, size_t n, const char* name, AttrValue& v,
                          std::uint64_t& held) {
  if (H5Tis_variable_str(type) > 0) return read_variable_strings(attr, space, n, name, v, held);
  std::vector<char> buf(size * n + 1, '\0');
  Hid mem = own_type(H5Tcopy(type));
  if (H5Aread(attr, mem.get(), buf.data()) < 0) {
    return hdf5_failure(ErrorCode::kHdf5, std::string("cannot read attribute ") + name);
  }
  const bool space_padded = H5Tget_strpad(type) == H5T_STR_SPACEPAD;
  for (size_t i = 0; i < n; ++i) {
    NCERT_RETURN_IF_ERROR(stored_string(std::string(buf.data() + i * size, size), space_padded, name, v));
  }
  return Status();
}

/// The n values of an integer attribute as int64; a uint64 beyond int64 makes it kOther.
Status read_int_values(hid_t attr, hid_t type, size_t size, size_t n, const char* name, AttrValue& v) {
  const bool is_unsigned = H5Tget_sign(type) == H5T_SGN_NONE;
  if (is_unsigned && size == 8) {
    std::vector<std::uint64_t> u(n);
    if (H5Aread(attr, H5T_NATIVE_UINT64, u.data()) < 0) {
      return hdf5_failure(ErrorCode::kHdf5, std::string("cannot read attribute ") + name);
    }
    for (auto x : u) {
      if (x > static_cast<std::uint64_t>(INT64_MAX)) {
        v.kind = AttrValue::Kind::kOther;
        v.type_description = "uint64 beyond int64";
        return Status();
      }
      v.ints.push_back(static_cast<std::int64_t>(x));
    }
    return Status();
  }
  v.ints.resize(n);
  if (H5Aread(attr, H5T_NATIVE_INT64, v.ints.data()) < 0) {
    return hdf5_failure(ErrorCode::kHdf5, std::string("cannot read attribute ") + name);
  }
  return Status();
}

/// Charges `bytes` read for attribute `name` to the budget (none: nothing to charge).
Status charge(AttributeBudget* budget, std::uint64_t bytes, const char* name) {
  if (budget == nullptr) return Status();
  budget->used += bytes;
  if (budget->used <= budget->limit) return Status();
  return Status(ErrorCode::kStorageBomb,
                std::string("attribute ") + name + ": the attributes read so far hold " + std::to_string(budget->used) +
                    " bytes, more than the " + std::to_string(budget->limit) +
                    " bytes this file's attributes may (64 MiB, or twice the file): their values are stored once and "
                    "read again and again (variable-length strings sharing one heap object, or a shared attribute "
                    "message); refused");
}

Result<AttrValue> read_one_attribute(hid_t obj, const char* name, AttributeBudget* budget) {
  Hid attr = own_attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr.valid()) return hdf5_failure(ErrorCode::kHdf5, std::string("cannot open attribute ") + name);
  Hid type = own_type(H5Aget_type(attr.get()));
  Hid space = own_space(H5Aget_space(attr.get()));
  if (!type.valid() || !space.valid()) {
    return hdf5_failure(ErrorCode::kHdf5, std::string("cannot read attribute ") + name);
  }
  AttrValue v;
  const hssize_t npoints = H5Sget_simple_extent_npoints(space.get());
  const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
  v.scalar = sclass == H5S_SCALAR || npoints == 1;
  const H5T_class_t cls = H5Tget_class(type.get());
  const size_t size = H5Tget_size(type.get());
  if (npoints < 0 || sclass == H5S_NULL || static_cast<hsize_t>(npoints) > kMaxAttrElements ||
      size * static_cast<size_t>(std::max<hssize_t>(npoints, 0)) > kMaxAttrBytes) {
    v.kind = AttrValue::Kind::kOther;
    if (sclass == H5S_NULL || npoints < 0) {
      v.type_description = "empty";
    } else if (static_cast<hsize_t>(npoints) > kMaxAttrElements) {
      v.type_description = "oversized: " + std::to_string(npoints) + " elements";
    } else {
      v.type_description = "oversized: " + std::to_string(size * static_cast<size_t>(npoints)) + " bytes";
    }
    return v;
  }
  const auto n = static_cast<size_t>(npoints);
  const bool variable = cls == H5T_STRING && H5Tis_variable_str(type.get()) > 0;
  if (variable && n > 1) {
    // Each string may point at one shared heap object; the format's strings are scalars.
    v.kind = AttrValue::Kind::kOther;
    v.type_description = "variable-length strings, " + std::to_string(n) + " of them (not read)";
    return v;
  }
  // Fixed-size values are charged before they are read; a variable-length string after, by the
  // bytes its heap object held.
  if (!variable) NCERT_RETURN_IF_ERROR(charge(budget, size * n, name));
  if (cls == H5T_STRING) {
    v.kind = AttrValue::Kind::kString;
    std::uint64_t held = 0;  // a variable-length string's bytes, read whatever they turn out to be
    NCERT_RETURN_IF_ERROR(read_string_values(attr.get(), type.get(), space.get(), size, n, name, v, held));
    if (variable) NCERT_RETURN_IF_ERROR(charge(budget, held, name));
    return v;
  }
  if (cls == H5T_INTEGER) {
    v.kind = AttrValue::Kind::kInt;
    NCERT_RETURN_IF_ERROR(read_int_values(attr.get(), type.get(), size, n, name, v));
    return v;
  }
  if (cls == H5T_FLOAT && size <= 8) {
    v.kind = AttrValue::Kind::kFloat;
    v.floats.resize(n);
    if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, v.floats.data()) < 0) {
      return hdf5_failure(ErrorCode::kHdf5, std::string("cannot read attribute ") + name);
    }
    return v;
  }
  v.kind = AttrValue::Kind::kOther;
  v.type_description = classify_type(type.get()).description;
  return v;
}

// An object of the format has at most ~20 attributes; a corrupt attribute index can claim
// millions.
constexpr std::size_t kMaxAttributes = 4096;

struct AttrNames {
  std::vector<std::string> names;
  bool too_many = false;
};

herr_t collect_attr_name(hid_t, const char* name, const H5A_info_t*, void* data) {
  auto* n = static_cast<AttrNames*>(data);
  if (n->names.size() >= kMaxAttributes) {
    n->too_many = true;
    return 1;  // stop
  }
  n->names.emplace_back(name);
  return 0;
}

}  // namespace

AttributeBudget attribute_budget(std::uint64_t file_size) {
  constexpr std::uint64_t kFloor = std::uint64_t{64} << 20;
  return {std::max(kFloor, file_size > UINT64_MAX / 2 ? UINT64_MAX : 2 * file_size), 0};
}

Result<std::vector<AttributeInfo>> read_attributes(hid_t obj, AttributeBudget* budget) {
  AttrNames names;
  hsize_t idx = 0;
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr_name, &names) < 0) {
    return hdf5_failure(ErrorCode::kHdf5, "cannot list the attributes (a corrupt attribute index)");
  }
  if (names.too_many) {
    return Status(ErrorCode::kTreeLimit, "more than " + std::to_string(kMaxAttributes) + " attributes; refused");
  }
  std::sort(names.names.begin(), names.names.end());
  std::vector<AttributeInfo> out;
  out.reserve(names.names.size());
  for (std::string& name : names.names) {
    NCERT_ASSIGN_OR_RETURN(AttrValue v, read_one_attribute(obj, name.c_str(), budget));
    out.push_back({std::move(name), std::move(v)});
  }
  return out;
}

}  // namespace ncert::certify::detail
