// A decoder of TensorBoard event files written from the formats' specifications (TFRecord framing
// with masked CRC32C, the protobuf wire format of Event, Summary and SessionLog), sharing no code
// with SummaryWriter: the tests read what Cohort writes with it.
#pragma once

#include <bit>
#include <boost/crc.hpp>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cohort::test::events {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};

struct Value {
  std::string tag;
  float simple_value = 0;
  std::optional<Histogram> histo;
};

struct Event {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;
  bool has_summary = false;
  std::vector<Value> values;
  int session_status = 0;  // SessionLog.status: START = 1
};

struct DecodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::uint32_t masked_crc(const std::string& bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  const std::uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

inline std::uint64_t le(const std::string& bytes, std::size_t at, int size) {
  std::uint64_t v = 0;
  for (int i = size - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Reads protobuf fields from a message; throws DecodeError on anything malformed.
class Fields {
 public:
  explicit Fields(std::string bytes) : bytes_(std::move(bytes)) {}
  bool done() const { return at_ == bytes_.size(); }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ >= bytes_.size()) throw DecodeError{"varint runs past the message"};
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    throw DecodeError{"varint longer than 10 bytes"};
  }
  std::uint64_t fixed(int size) {
    if (at_ + size > bytes_.size()) throw DecodeError{"fixed field runs past the message"};
    const std::uint64_t v = le(bytes_, at_, size);
    at_ += size;
    return v;
  }
  std::string length_delimited() {
    const std::uint64_t n = varint();
    if (n > bytes_.size() - at_) throw DecodeError{"length-delimited field runs past the message"};
    std::string out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }

 private:
  std::string bytes_;
  std::size_t at_ = 0;
};

inline void expect_type(std::uint64_t key, int type) {
  if (static_cast<int>(key & 7) != type)
    throw DecodeError{"field " + std::to_string(key >> 3) + " has wire type " +
                      std::to_string(key & 7) + ", expected " + std::to_string(type)};
}

// A repeated double field: packed (wire type 2, proto3's default) or one value per key (1).
inline void append_doubles(Fields& in, std::uint64_t key, std::vector<double>& out) {
  if ((key & 7) == 1) {
    out.push_back(std::bit_cast<double>(in.fixed(8)));
    return;
  }
  expect_type(key, 2);
  Fields packed(in.length_delimited());
  while (!packed.done()) out.push_back(std::bit_cast<double>(packed.fixed(8)));
}

// HistogramProto{min=1, max=2, num=3, sum=4, sum_squares=5 double; bucket_limit=6, bucket=7
// repeated double}.
inline Histogram decode_histogram(const std::string& bytes) {
  Histogram h;
  Fields in(bytes);
  while (!in.done()) {
    const std::uint64_t key = in.varint();
    const auto fixed_double = [&](double& out) {
      expect_type(key, 1);
      out = std::bit_cast<double>(in.fixed(8));
    };
    switch (key >> 3) {
      case 1: fixed_double(h.min); break;
      case 2: fixed_double(h.max); break;
      case 3: fixed_double(h.num); break;
      case 4: fixed_double(h.sum); break;
      case 5: fixed_double(h.sum_squares); break;
      case 6: append_doubles(in, key, h.bucket_limit); break;
      case 7: append_doubles(in, key, h.bucket); break;
      default: throw DecodeError{"unexpected HistogramProto field " + std::to_string(key >> 3)};
    }
  }
  return h;
}

inline Value decode_value(const std::string& bytes) {
  Value value;
  Fields in(bytes);
  while (!in.done()) {
    const std::uint64_t key = in.varint();
    switch (key >> 3) {
      case 1: expect_type(key, 2); value.tag = in.length_delimited(); break;
      case 2: expect_type(key, 5); value.simple_value = std::bit_cast<float>(static_cast<std::uint32_t>(in.fixed(4))); break;
      case 5: expect_type(key, 2); value.histo = decode_histogram(in.length_delimited()); break;
      default: throw DecodeError{"unexpected Summary.Value field " + std::to_string(key >> 3)};
    }
  }
  return value;
}

inline Event decode_event(const std::string& bytes) {
  Event event;
  Fields in(bytes);
  while (!in.done()) {
    const std::uint64_t key = in.varint();
    switch (key >> 3) {
      case 1: expect_type(key, 1); event.wall_time = std::bit_cast<double>(in.fixed(8)); break;
      case 2: expect_type(key, 0); event.step = static_cast<std::int64_t>(in.varint()); break;
      case 3: expect_type(key, 2); event.file_version = in.length_delimited(); break;
      case 5: {
        expect_type(key, 2);
        event.has_summary = true;
        Fields summary(in.length_delimited());
        while (!summary.done()) {
          const std::uint64_t summary_key = summary.varint();
          if (summary_key != (1 << 3 | 2)) throw DecodeError{"unexpected Summary field"};
          event.values.push_back(decode_value(summary.length_delimited()));
        }
        break;
      }
      case 7: {
        expect_type(key, 2);
        Fields log(in.length_delimited());
        while (!log.done()) {
          const std::uint64_t log_key = log.varint();
          if (log_key != (1 << 3 | 0)) throw DecodeError{"unexpected SessionLog field"};
          event.session_status = static_cast<int>(log.varint());
        }
        break;
      }
      default: throw DecodeError{"unexpected Event field " + std::to_string(key >> 3)};
    }
  }
  return event;
}

// TFRecord: uint64 length, uint32 masked_crc32c(length), data, uint32 masked_crc32c(data).
inline std::vector<Event> decode_file(const std::string& bytes) {
  std::vector<Event> events;
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::string where = "record " + std::to_string(events.size()) + " at byte " + std::to_string(at);
    if (bytes.size() - at < 12) throw DecodeError{where + ": truncated header"};
    const std::string length_bytes = bytes.substr(at, 8);
    if (le(bytes, at + 8, 4) != masked_crc(length_bytes)) throw DecodeError{where + ": length crc mismatch"};
    const std::uint64_t length = le(bytes, at, 8);
    if (bytes.size() - at - 12 < length + 4) throw DecodeError{where + ": truncated data"};
    const std::string data = bytes.substr(at + 12, length);
    if (le(bytes, at + 12 + length, 4) != masked_crc(data)) throw DecodeError{where + ": data crc mismatch"};
    events.push_back(decode_event(data));
    at += 12 + length + 4;
  }
  return events;
}

inline std::vector<Event> decode(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DecodeError{"cannot open " + path};
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return decode_file(bytes.str());
}

// The error decode_file() reports for `bytes`, or nothing when they decode.
inline std::optional<std::string> decode_error(const std::string& bytes) {
  try {
    decode_file(bytes);
  } catch (const DecodeError& e) {
    return e.what();
  }
  return std::nullopt;
}

}  // namespace cohort::test::events
