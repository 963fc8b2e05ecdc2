// The safetensors header (ctpipe/format/safetensors.hpp): written as JSON that a JSON library reads
// back as safetensors defines it, read back strictly, and every malformed header refused with a
// message that says what is wrong.
#include <ctpipe/format/safetensors.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace st = ctpipe::safetensors;

namespace {
st::header two_tensors() {
  st::header h;
  h.tensors.push_back({"layers.0.weight", "F32", {2, 3}, 0, 24});
  h.tensors.push_back({"layers.0.bias", "F64", {3}, 24, 48});
  h.metadata["ctpipe.data"] = "epoch \"3\"\n\\ \x01";
  h.metadata["ctpipe.step"] = "10";
  return h;
}
}  // namespace

TEST_CASE("safetensors: a written header is JSON as the format defines it, padded to 8 bytes, and reads back") {
  const st::header h = two_tensors();
  const std::string text = st::write_header(h);
  CHECK(text.size() % 8 == 0);
  const nlohmann::json j = nlohmann::json::parse(text);
  CHECK(j["layers.0.weight"]["dtype"] == "F32");
  CHECK(j["layers.0.weight"]["shape"] == nlohmann::json::array({2, 3}));
  CHECK(j["layers.0.bias"]["data_offsets"] == nlohmann::json::array({24, 48}));
  CHECK(j["__metadata__"]["ctpipe.data"] == "epoch \"3\"\n\\ \x01");
  const st::header back = st::read_header(text, 48);
  CHECK(back.tensors == h.tensors);
  CHECK(back.metadata == h.metadata);
  CHECK(back.data_bytes() == 48);
  // What another writer may do: keys in any order, spaces, escapes, an empty file of tensors.
  const st::header other = st::read_header(
      R"( { "b" : {"data_offsets":[4,12], "shape":[2], "dtype":"F32"}, "a\u00e9":{"dtype":"U8","shape":[2,2],"data_offsets":[0,4]} } )",
      12);
  REQUIRE(other.tensors.size() == 2);
  CHECK(other.tensors[0].name == "a\xc3\xa9");
  CHECK(other.tensors[1].name == "b");
  CHECK(st::read_header("{}", 0).tensors.empty());
  CHECK(st::dtype_size("BF16") == 2);
  CHECK(st::dtype_size("F8") == 0);
}

TEST_CASE("safetensors: a malformed header is refused, saying what is wrong") {
  struct bad {
    const char* json;
    unsigned long long bytes;
    const char* message;
  };
  const bad cases[] = {
      {"", 0, "byte 0: expected '{'"},
      {"{", 0, "expected '\"'"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 4, "the header ends before its object's '}'"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x)", 4, "bytes after the header's object"},
      {R"({"a":{"dtype":"F32","shape":[1]}})", 4, "tensor \"a\": needs dtype, shape and data_offsets"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"dtype":"F32"}})", 4, "repeated field \"dtype\""},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4, "unexpected or repeated field \"x\""},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4, "data_offsets must be [begin, end]"},
      {R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, "expected an unsigned integer"},
      {R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "expected an unsigned integer"},
      {R"({"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", 4, "leading 0"},
      {R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}})", 4, "a number too large"},
      {R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", 4, "unknown dtype \"Q7\""},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "need 8 bytes from 0"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "need 4 bytes from 0 (tensors lie end to end)"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       8, "need 4 bytes from 4"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "tensor \"a\" twice"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8,
       "the tensors cover 4 bytes, and the file holds 8"},
      {R"({"__metadata__":{"k":"v","k":"w"}})", 0, "a metadata name twice"},
      {R"({"__metadata__":{"k":1}})", 0, "expected '\"'"},
      {R"({"a\q":{}})", 0, "an unknown escape \\q"},
      {R"({"a\u12":{}})", 0, "four hex digits"},
      {R"({"a\ud800":{}})", 0, "surrogate"},
      {"{\"a\x01\":{}}", 0, "a control character"},
      {R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4, "a tensor without a name"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]} "b")", 4, "expected ',' or '}'"},
  };
  for (const bad& b : cases) {
    const std::string json = b.json;
    CAPTURE(json);
    try {
      (void)st::read_header(json, b.bytes);
      FAIL("read");
    } catch (const ctpipe::format_error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(what.find(b.message) != std::string::npos);
    }
  }
}

#include <ctpipe/format/checksum.hpp>

#include <array>
#include <cstddef>

TEST_CASE("checksums: zlib's CRC-32, 8 lowercase hex digits, and the header's own checksum read as zeros") {
  // The CRC-32 check value (the catalogue's "123456789"), and a run that slicing-by-8 splits.
  CHECK(st::crc32("123456789") == 0xCBF43926u);
  CHECK(st::crc32("") == 0u);
  CHECK(st::crc32("The quick brown fox jumps over the lazy dog") == 0x414FA339u);
  CHECK(st::crc32("89", st::crc32("1234567")) == 0xCBF43926u);  // continued
  CHECK(st::checksum_text(0xCBF43926u) == "cbf43926");
  CHECK(st::checksum_text(0x1u) == "00000001");
  std::uint32_t v = 0;
  CHECK(st::checksum_value("cbf43926", v));
  CHECK(v == 0xCBF43926u);
  CHECK_FALSE(st::checksum_value("CBF43926", v));  // another case is another byte: a damaged one
  CHECK_FALSE(st::checksum_value("cbf4392", v));
  CHECK_FALSE(st::checksum_value("cbf4392g", v));
  // The header checksum's place, white space allowed around the ':'.
  CHECK(st::find_header_checksum(R"({"a":{},"__metadata__":{"ctpipe.header_crc32":"0000000a"}})") == 47u);
  CHECK(st::find_header_checksum(R"({"ctpipe.header_crc32" : "0000000a"})") == 26u);
  CHECK(st::find_header_checksum(R"({"__metadata__":{}})") == std::string_view::npos);
  CHECK_THROWS_WITH_AS((void)st::find_header_checksum(R"({"ctpipe.header_crc32":"0000000A"})"),
                       "safetensors header: \"ctpipe.header_crc32\" is not followed by 8 lowercase hex digits",
                       ctpipe::format_error);
  CHECK_THROWS_WITH_AS(
      (void)st::find_header_checksum(R"({"ctpipe.header_crc32":"00000000","ctpipe.header_crc32":"00000000"})"),
      "safetensors header: \"ctpipe.header_crc32\" appears twice", ctpipe::format_error);
  // Over the length bytes and the header, the digits read as "00000000": what they hold does not
  // change the sum, and every other byte does.
  const std::array<std::byte, 8> len{std::byte{40}};
  const std::string a = R"({"ctpipe.header_crc32":"12345678"}      )", b = R"({"ctpipe.header_crc32":"9abcdef0"}      )";
  REQUIRE(a.size() == 40);
  CHECK(st::header_checksum(len, a, 24) == st::header_checksum(len, b, 24));
  std::string zeros = a;
  zeros.replace(24, 8, "00000000");
  std::array<std::byte, 48> whole{};
  for (std::size_t i = 0; i < 8; ++i) whole[i] = len[i];
  for (std::size_t i = 0; i < 40; ++i) whole[8 + i] = static_cast<std::byte>(zeros[i]);
  CHECK(st::header_checksum(len, a, 24) == st::crc32(whole));
  const std::array<std::byte, 8> other{std::byte{41}};
  CHECK(st::header_checksum(other, a, 24) != st::header_checksum(len, a, 24));
}
