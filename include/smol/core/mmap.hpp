// MappedFile: a read-only memory map of a whole file (POSIX mmap, or
// CreateFileMapping on Windows). Weights are read straight from the mapping,
// so opening a model costs no copy and pages come in on first touch.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "../error.hpp"

#if defined(_WIN32)
#include "../detail/windows.hpp"
#else
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

SMOL_NAMESPACE_BEGIN

class MappedFile {
public:
    MappedFile() = default;
    // Throws smol::Error; try_open reports the same errors as a value.
    explicit MappedFile(const std::string& path)
        : MappedFile(detail::value_or_fail(try_open(path))) {}
    ~MappedFile() { close(); }
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    MappedFile(MappedFile&& other) noexcept { swap(other); }
    MappedFile& operator=(MappedFile&& other) noexcept {
        swap(other);
        return *this;
    }

    // Maps `path`: Error(io) when it cannot be opened, is not a regular file
    // or cannot be mapped; Error(format) when it is empty.
    static Expected<MappedFile> try_open(const std::string& path) {
        MappedFile file;
        SMOL_TRY(file.open(path));
        return file;
    }

    const uint8_t* data() const noexcept { return data_; }
    size_t size() const noexcept { return size_; }

    void swap(MappedFile& other) noexcept {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
    }

    // Tells the OS these bytes are no longer needed (e.g. after repacking a
    // tensor elsewhere) so they leave the resident set. Best effort.
    void release_pages(const uint8_t* begin, size_t bytes) const noexcept {
#if !defined(_WIN32)
        if (!data_ || bytes == 0) return;
        const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
        uintptr_t start = (uintptr_t(begin) + page - 1) / page * page;
        const uintptr_t end = (uintptr_t(begin) + bytes) / page * page;
        if (end > start) madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
#else
        (void)begin;
        (void)bytes;
#endif
    }

private:
    Status open(const std::string& path) {
#if defined(_WIN32)
        HANDLE file = CreateFileA(path.c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr,
                                  OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
        if (file == INVALID_HANDLE_VALUE)
            return Status(ErrorKind::io, "cannot open '" + path + "'");
        LARGE_INTEGER size;
        if (!GetFileSizeEx(file, &size)) {
            CloseHandle(file);
            return Status(ErrorKind::io, "cannot get the size of '" + path + "'");
        }
        if (size.QuadPart == 0) {
            CloseHandle(file);
            return Status(ErrorKind::format, "'" + path + "' is empty");
        }
        HANDLE mapping = CreateFileMappingA(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
        CloseHandle(file);
        if (!mapping) return Status(ErrorKind::io, "cannot map '" + path + "'");
        void* view = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
        CloseHandle(mapping);
        if (!view) return Status(ErrorKind::io, "cannot map '" + path + "'");
        size_ = size_t(size.QuadPart);
        data_ = static_cast<const uint8_t*>(view);
        return {};
#else
        // Non-blocking, so that opening a FIFO (or a device) cannot wait for a
        // writer; only a regular file goes on to be mapped.
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            return Status(ErrorKind::io, "cannot open '" + path + "': " + std::strerror(errno));
        auto refuse = [fd](ErrorKind kind, std::string message) {
            ::close(fd);
            return Status(kind, std::move(message));
        };
        struct stat st {};
        if (fstat(fd, &st) != 0) return refuse(ErrorKind::io, "cannot stat '" + path + "'");
        if (S_ISDIR(st.st_mode))
            return refuse(ErrorKind::io, "'" + path + "' is a directory, not a file");
        if (!S_ISREG(st.st_mode))
            return refuse(ErrorKind::io, "'" + path +
                                             "' is not a regular file (a FIFO, socket or device); "
                                             "models are read from regular files only");
        if (st.st_size <= 0) return refuse(ErrorKind::format, "'" + path + "' is empty");
        const size_t size = size_t(st.st_size);
        void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
        ::close(fd);
        if (p == MAP_FAILED)
            return Status(ErrorKind::io, "cannot map '" + path + "': " + std::strerror(errno));
        size_ = size;
        data_ = static_cast<const uint8_t*>(p);
        return {};
#endif
    }

    void close() noexcept {
        if (!data_) return;
#if defined(_WIN32)
        UnmapViewOfFile(data_);
#else
        munmap(const_cast<uint8_t*>(data_), size_);
#endif
        data_ = nullptr;
        size_ = 0;
    }

    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

SMOL_NAMESPACE_END
