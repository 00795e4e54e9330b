// Core types: fp16/bf16 conversion, the aligned allocator (AlignedBuffer), block sizes.
#include <doctest/doctest.h>
#include <smol/smol.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_core {

TEST_CASE("fp16 round trips every half value") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = smol::fp16_to_fp32(uint16_t(h));
        if (std::isnan(f)) {
            CHECK(std::isnan(smol::fp16_to_fp32(smol::fp32_to_fp16(f))));
            continue;
        }
        REQUIRE(smol::fp32_to_fp16(f) == h);
    }
}

TEST_CASE("fp16 known values and rounding") {
    CHECK(smol::fp16_to_fp32(0x3c00) == 1.0f);
    CHECK(smol::fp16_to_fp32(0xc000) == -2.0f);
    CHECK(smol::fp16_to_fp32(0x7bff) == 65504.0f);
    CHECK(smol::fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(smol::fp32_to_fp16(65520.0f) == 0x7c00);                      // overflow to inf
    CHECK(smol::fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie -> even
    CHECK(smol::fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
    CHECK(smol::fp32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // tie -> even (zero)
    CHECK(smol::fp32_to_fp16(std::ldexp(3.0f, -26)) == 0x0001);
    CHECK(smol::fp32_to_fp16(1e-10f) == 0);
    CHECK(smol::fp32_to_fp16(-0.0f) == 0x8000);
}

TEST_CASE("bf16 conversion") {
    CHECK(smol::bf16_to_fp32(smol::fp32_to_bf16(1.0f)) == 1.0f);
    CHECK(smol::fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // tie -> even
    CHECK(smol::fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
    CHECK(std::isnan(
        smol::bf16_to_fp32(smol::fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    for (uint32_t b = 0; b < 65536; ++b) {
        const float f = smol::bf16_to_fp32(uint16_t(b));
        if (!std::isnan(f)) REQUIRE(smol::fp32_to_bf16(f) == b);
    }
}

TEST_CASE("block sizes match the geometry table") {
    CHECK(smol::type_traits(smol::GGMLType::Q4_K).type_size == sizeof(smol::BlockQ4K));
    CHECK(smol::type_traits(smol::GGMLType::Q5_K).type_size == sizeof(smol::BlockQ5K));
    CHECK(smol::type_traits(smol::GGMLType::Q6_K).type_size == sizeof(smol::BlockQ6K));
    CHECK(smol::type_traits(smol::GGMLType::Q8_K).type_size == sizeof(smol::BlockQ8K));
    CHECK(smol::type_traits(smol::GGMLType::Q8_0).type_size == sizeof(smol::BlockQ8_0));
    CHECK(smol::row_bytes(smol::GGMLType::Q4_K, 2048) == 8 * 144);
    CHECK_FALSE(smol::is_known_type(smol::GGMLType(99)));
    CHECK(smol::type_name(smol::GGMLType(99)) == "type#99");
}

TEST_CASE("AlignedBuffer is aligned, zeroed, copyable and movable") {
    smol::detail::AlignedBuffer a(100);
    CHECK(reinterpret_cast<uintptr_t>(a.data()) % smol::detail::kAlignment == 0);
    for (size_t i = 0; i < a.size(); ++i) REQUIRE(a.data()[i] == 0);
    a.data()[5] = 7;
    smol::detail::AlignedBuffer b = a;
    CHECK(b.data()[5] == 7);
    smol::detail::AlignedBuffer c = std::move(a);
    CHECK(c.data()[5] == 7);
    CHECK(c.size() == 100);

    // The KV cache's form of the same allocator: uninitialized, same alignment.
    const smol::detail::AlignedArray<uint8_t> raw(
        static_cast<uint8_t*>(smol::detail::aligned_allocate(3)));
    CHECK(reinterpret_cast<uintptr_t>(raw.get()) % smol::detail::kAlignment == 0);
}

namespace {
smol::Expected<int> parse_digit(char c) {
    if (c < '0' || c > '9')
        return smol::ErrorInfo{smol::ErrorKind::invalid_argument, std::string("not a digit: ") + c};
    return c - '0';
}
smol::Expected<int> sum_digits(const std::string& text) {
    int sum = 0;
    for (char c : text) {
        SMOL_TRY_ASSIGN(const int digit, parse_digit(c));
        sum += digit;
    }
    return sum;
}
smol::Status require_even(const std::string& text) {
    SMOL_TRY_ASSIGN(const int sum, sum_digits(text));
    if (sum % 2 != 0)
        return smol::Status(smol::ErrorKind::format, "odd sum " + std::to_string(sum));
    return {};
}
smol::Status check_all(const std::vector<std::string>& texts) {
    for (const std::string& text : texts) SMOL_TRY(require_even(text));
    return {};
}
}  // namespace

TEST_CASE("errors as values: Status, Expected, SMOL_TRY and SMOL_TRY_ASSIGN") {
    const smol::Status ok;
    CHECK(ok.ok());
    CHECK(bool(ok));
    const smol::Status bad(smol::ErrorKind::io, "no file");
    CHECK_FALSE(bad.ok());
    CHECK(bad.error().kind == smol::ErrorKind::io);
    CHECK(bad.error().message == "no file");

    CHECK(sum_digits("123").value() == 6);
    const smol::Expected<int> not_digits = sum_digits("12x");
    REQUIRE_FALSE(not_digits.ok());
    CHECK(not_digits.error().kind == smol::ErrorKind::invalid_argument);
    CHECK(not_digits.error().message == "not a digit: x");

    // The first failure travels unchanged through the layers.
    CHECK(check_all({"22", "4"}).ok());
    smol::Status odd = check_all({"22", "3", "x"});
    REQUIRE_FALSE(odd.ok());
    CHECK(odd.error().kind == smol::ErrorKind::format);
    CHECK(odd.take_error().message == "odd sum 3");
    smol::Status not_digit = check_all({"22", "x", "3"});
    CHECK(not_digit.error().kind == smol::ErrorKind::invalid_argument);

    // Move-only values, and an Expected made from a failed Status.
    smol::Expected<std::unique_ptr<int>> owned(std::make_unique<int>(7));
    REQUIRE(owned.ok());
    std::unique_ptr<int> taken = std::move(owned).value();
    CHECK(*taken == 7);
    const smol::Expected<std::string> from_status(smol::Status(smol::ErrorKind::missing, "gone"));
    CHECK(from_status.error().kind == smol::ErrorKind::missing);

    // The throwing forms raise the same error.
    CHECK(smol::detail::value_or_fail(sum_digits("99")) == 18);
    try {
        smol::detail::ok_or_fail(require_even("1"));
        FAIL("ok_or_fail did not throw");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::format);
        CHECK(std::string(e.what()) == "odd sum 1");
    }
}

}  // namespace test_core
