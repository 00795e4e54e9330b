// The byte format of a saved session (Generator::save_session /
// restore_session). Little-endian, version 2:
//   offset 0   "SMOLSESS"
//   offset 8   u32 version (2)
//   offset 12  u32 CRC-32C of every other byte: [0, 12) then [16, end)
//   offset 16  u64 identity length + identity bytes (Model::identity()),
//              u64 n_history + n_history i32 ids,
//              u64 kv length + BackendCache::serialize() bytes (to the end):
//              the portable cache format (model/backend.hpp), so a session
//              saved on one backend restores on another of the same model
// The checksum is why version 1 (a reserved zero word where the CRC now is,
// nothing covered) is no longer read: a corrupted v1 session could restore a
// history that disagrees with its cache.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../detail/bytes.hpp"
#include "../detail/crc32c.hpp"
#include "../error.hpp"
#include "../model/backend.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

constexpr uint8_t kSessionMagic[8] = {'S', 'M', 'O', 'L', 'S', 'E', 'S', 'S'};
constexpr uint32_t kSessionVersion = 2;
constexpr size_t kSessionCrcOffset = 12;
constexpr size_t kSessionHeaderBytes = 16;

// The CRC-32C of a whole session (size >= kSessionHeaderBytes) except its own
// field: what save_session stores and restore_session checks (tools that
// rewrite a session, such as the fuzzer, reseal it with this).
inline uint32_t session_checksum(const uint8_t* data, size_t size) noexcept {
    const uint32_t head = crc32c(data, kSessionCrcOffset);
    return crc32c_update(head, data + kSessionHeaderBytes, size - kSessionHeaderBytes);
}

// A session's bytes from its three parts.
inline std::vector<uint8_t> encode_session(const std::string& identity,
                                           const std::vector<int32_t>& history,
                                           const std::vector<uint8_t>& kv) {
    // Constructed from the magic (not inserted into an empty vector): g++ 12
    // warns falsely (-Wstringop-overflow) on the latter at -O2.
    std::vector<uint8_t> out(kSessionMagic, kSessionMagic + 8);
    append_le<uint32_t>(out, kSessionVersion);
    append_le<uint32_t>(out, 0);  // the CRC, filled in last
    append_le<uint64_t>(out, identity.size());
    out.insert(out.end(), identity.begin(), identity.end());
    append_le<uint64_t>(out, history.size());
    for (int32_t id : history) append_le<int32_t>(out, id);
    append_le<uint64_t>(out, kv.size());
    out.insert(out.end(), kv.begin(), kv.end());
    const uint32_t crc = session_checksum(out.data(), out.size());
    std::memcpy(out.data() + kSessionCrcOffset, &crc, 4);
    return out;
}

// A session's parts, checked for framing and checksum; the cache bytes are a
// view into the input (checked against a cache by its owner).
struct SessionParts {
    std::string identity;
    std::vector<int32_t> history;  // every id in [0, n_vocab)
    const uint8_t* kv = nullptr;
    size_t kv_size = 0;
};

// Malformed or corrupted bytes are ErrorKind::format; another version (1
// included) is ErrorKind::unsupported. The checksum is verified before
// anything sized by counts in the bytes is allocated.
inline Expected<SessionParts> parse_session(const uint8_t* data, size_t size, size_t n_vocab) {
    if (!data && size != 0)
        return ErrorInfo{ErrorKind::invalid_argument, "session: null data with a size"};
    size_t pos = 0;
    // 64-bit counts compared against what is left, never added to pos first,
    // so a forged count can neither wrap nor truncate on 32-bit size_t.
    auto truncated = [&](uint64_t n) { return uint64_t(size - pos) < n; };
    auto truncated_error = [](const char* what) {
        return ErrorInfo{ErrorKind::format, std::string("session: truncated (") + what + ")"};
    };
    if (truncated(kSessionHeaderBytes)) return truncated_error("header");
    if (std::memcmp(data, kSessionMagic, 8) != 0)
        return ErrorInfo{ErrorKind::format, "session: not a smol session (bad magic)"};
    const uint32_t version = read_le<uint32_t>(data, 8);
    if (version != kSessionVersion)
        return ErrorInfo{ErrorKind::unsupported,
                         "session: version " + std::to_string(version) +
                             (version < kSessionVersion ? " is no longer supported"
                                                        : " is newer than this build") +
                             " (this build reads version " + std::to_string(kSessionVersion) +
                             " only)"};
    if (read_le<uint32_t>(data, kSessionCrcOffset) != session_checksum(data, size))
        return ErrorInfo{ErrorKind::format, "session: checksum mismatch (corrupted)"};
    pos = kSessionHeaderBytes;

    SessionParts parts;
    if (truncated(8)) return truncated_error("identity length");
    const uint64_t identity_size = read_le<uint64_t>(data, pos);
    pos += 8;
    if (truncated(identity_size)) return truncated_error("identity");
    parts.identity.assign(reinterpret_cast<const char*>(data + pos), size_t(identity_size));
    pos += size_t(identity_size);

    if (truncated(8)) return truncated_error("history length");
    const uint64_t n_history = read_le<uint64_t>(data, pos);
    pos += 8;
    if (n_history > (size - pos) / 4) return truncated_error("history");
    parts.history.resize(size_t(n_history));
    for (int32_t& id : parts.history) {
        id = read_le<int32_t>(data, pos);
        pos += 4;
        if (id < 0 || size_t(id) >= n_vocab)
            return ErrorInfo{ErrorKind::format,
                             "session: token id " + std::to_string(id) + " outside the vocabulary"};
    }

    if (truncated(8)) return truncated_error("cache length");
    const uint64_t kv_size = read_le<uint64_t>(data, pos);
    pos += 8;
    if (truncated(kv_size)) return truncated_error("cache");
    if (uint64_t(size - pos) != kv_size)
        return ErrorInfo{ErrorKind::format, "session: trailing bytes after the cache"};
    parts.kv = data + pos;
    parts.kv_size = size_t(kv_size);
    return parts;
}

// Checks a session against the generator that restores it (the model it was
// saved for, the cache's geometry, a history covering the cache) and only
// then restores its cache into `kv`; returns the history. Another model's
// session is ErrorKind::invalid_argument; a session longer than the cache's
// n_ctx is ErrorKind::out_of_range (from the cache's own check). On error `kv`
// is unchanged.
inline Expected<std::vector<int32_t>> restore_session(const uint8_t* data, size_t size,
                                                      const std::string& identity, size_t n_vocab,
                                                      BackendCache& kv) {
    SMOL_TRY_ASSIGN(SessionParts parts, parse_session(data, size, n_vocab));
    if (parts.identity != identity)
        return ErrorInfo{ErrorKind::invalid_argument,
                         "session: saved for model '" + parts.identity +
                             "', but this generator runs model '" + identity + "'"};
    SMOL_TRY_ASSIGN(const KVImage image,
                    try_parse_kv_image(parts.kv, parts.kv_size, kv.n_layers(), kv.n_kv_heads(),
                                       kv.head_dim(), kv.n_ctx()));
    if (image.size > parts.history.size())
        return ErrorInfo{ErrorKind::format,
                         "session: the cache holds more positions than the history"};
    SMOL_TRY(kv.try_restore(parts.kv, parts.kv_size));
    return std::move(parts.history);
}

}  // namespace detail

SMOL_NAMESPACE_END
