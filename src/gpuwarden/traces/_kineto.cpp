// Kineto `traceEvents` → RankTrace columns, with simdjson's On-Demand parser.
//
// The fast path of gpuwarden.traces.decode (the msgspec path in traces.columns is the reference
// and the fallback). A Scanner decodes one batch of events (a JSON array) or one top-level object
// straight into numpy columns the caller reserved, reading only the keys the analyses use: no
// Python object per event. The walk runs without the GIL; Python objects (new names, the few
// per-row extras, metadata) are made afterwards. Anything outside the common grammar (a bool
// where a number belongs, an integer beyond 64 bits, a non-object event, invalid JSON) raises
// Unsupported and the caller decodes the whole file with msgspec, so odd files get exactly the
// reference behaviour and its error messages.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace od = simdjson::ondemand;

#define GPUWARDEN_TEXT(x) #x
#define GPUWARDEN_EXPAND(x) GPUWARDEN_TEXT(x)
#define SIMDJSON_VERSION_TEXT GPUWARDEN_EXPAND(SIMDJSON_VERSION)

namespace {

// |ts| or |dur| beyond 2**63 ns is no profiler clock (traces.model.MAX_TIME_US)
constexpr double MAX_TIME_US = 9223372036854775808.0 / 1000.0;
constexpr double INT64_LIMIT = 9223372036854775808.0;

// Output columns, in the order the caller passes them (traces.native.COLUMNS).
enum Column : int {
    C_INDEX, C_TS, C_DUR, C_NAME_ID, C_CAT_ID, C_PID, C_TID, C_STREAM, C_CORRELATION,
    C_EXTERNAL_ID, C_DEVICE, C_BYTES, N_COLUMNS
};
constexpr Py_ssize_t ITEMSIZE[N_COLUMNS] = {8, 8, 8, 4, 4, 8, 8, 8, 8, 8, 8, 8};
constexpr char KIND[N_COLUMNS] = {'i', 'f', 'f', 'i', 'i', 'i', 'i', 'i', 'i', 'i', 'i', 'i'};

// Python types seen for ts / dur over all events (TraceMetadata time flags).
enum Flag : int { TS_FLOAT = 1, TS_NONE = 2, DUR_FLOAT = 4, DUR_NONE = 8 };

// args keys kept per row for the analyses (traces.columns EXTRA_ARGS / MATMUL_OPS), in the
// order the Python side names them.
enum Extra : int {
    X_COLLECTIVE_NAME, X_IN_NELEMS, X_OUT_NELEMS, X_GROUP_SIZE, X_DTYPE, X_PG_NAME, X_PG_DESC,
    X_PG_RANKS, X_COMMS_ID, X_MEMORY_BANDWIDTH, X_SYNC_KIND, X_WAIT_STREAM, X_WAIT_CORR,
    X_INPUT_DIMS, N_EXTRAS
};
constexpr std::string_view EXTRA_KEY[N_EXTRAS] = {
    "Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
    "Process Group Name", "Process Group Description", "Process Group Ranks", "Comms Id",
    "memory bandwidth (GB/s)", "cuda_sync_kind", "wait_on_stream",
    "wait_on_cuda_event_record_corr_id", "Input Dims",
};

struct Unsupported {
    std::string why;
};

[[noreturn]] void unsupported(const char* why) { throw Unsupported{why}; }

[[noreturn, gnu::noinline, gnu::cold]] void failed(const char* why, simdjson::error_code error) {
    throw Unsupported{std::string(why) + ": " + simdjson::error_message(error)};
}

// The value of a simdjson result; an error sends the file to the reference decoder.
template <typename T>
[[gnu::always_inline]] inline T take(simdjson::simdjson_result<T>&& result, const char* why) {
    T value;
    simdjson::error_code error = std::move(result).get(value);
    if (error != simdjson::SUCCESS) [[unlikely]] failed(why, error);
    return value;
}

// A JSON value held without the GIL, turned into Python objects afterwards.
struct Node {
    enum Kind : uint8_t { NUL, TRUE_, FALSE_, INT, UINT, FLOAT, STRING, ARRAY, OBJECT } kind = NUL;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    std::string s;
    std::vector<std::string> keys;
    std::vector<Node> items;
};

// The kind of a number token. (Not od::number: simdjson 3.0.1's get_number() gives 0 for floats
// of more than 19 digits, as Kineto writes ns-resolution times; get_double() parses them.)
// An integer beyond 64 bits is then refused by get_int64() / get_uint64().
od::number_type number_type(od::value& value) {
    return take(value.get_number_type(), "number");
}

Node read_node(od::value value, int depth = 0) {
    if (depth > 64) unsupported("nesting too deep");
    Node node;
    switch (take(value.type(), "value type")) {
        case od::json_type::null:
            if (!take(value.is_null(), "null")) unsupported("bad literal");
            return node;
        case od::json_type::boolean:
            node.kind = take(value.get_bool(), "bool") ? Node::TRUE_ : Node::FALSE_;
            return node;
        case od::json_type::number:
            switch (number_type(value)) {
                case od::number_type::floating_point_number:
                    node.kind = Node::FLOAT;
                    node.d = take(value.get_double(), "float");
                    break;
                case od::number_type::signed_integer:
                    node.kind = Node::INT;
                    node.i = take(value.get_int64(), "integer");
                    break;
                default:
                    node.kind = Node::UINT;
                    node.u = take(value.get_uint64(), "integer beyond 64 bits");
            }
            return node;
        case od::json_type::string:
            node.kind = Node::STRING;
            node.s = std::string(take(value.get_string(), "string"));
            return node;
        case od::json_type::array:
            node.kind = Node::ARRAY;
            for (auto item : take(value.get_array(), "array")) {
                node.items.push_back(read_node(take(std::move(item), "array item"), depth + 1));
            }
            return node;
        case od::json_type::object:
            node.kind = Node::OBJECT;
            for (auto field_result : take(value.get_object(), "object")) {
                od::field field = take(std::move(field_result), "field");
                node.keys.emplace_back(take(field.unescaped_key(), "key"));
                node.items.push_back(read_node(field.value(), depth + 1));
            }
            return node;
    }
    unsupported("value type");
}

PyObject* to_python(const Node& node) {
    switch (node.kind) {
        case Node::NUL:
            Py_RETURN_NONE;
        case Node::TRUE_:
            Py_RETURN_TRUE;
        case Node::FALSE_:
            Py_RETURN_FALSE;
        case Node::INT:
            return PyLong_FromLongLong(node.i);
        case Node::UINT:
            return PyLong_FromUnsignedLongLong(node.u);
        case Node::FLOAT:
            return PyFloat_FromDouble(node.d);
        case Node::STRING:
            return PyUnicode_FromStringAndSize(node.s.data(), Py_ssize_t(node.s.size()));
        case Node::ARRAY: {
            PyObject* list = PyList_New(Py_ssize_t(node.items.size()));
            if (!list) return nullptr;
            for (size_t k = 0; k < node.items.size(); ++k) {
                PyObject* item = to_python(node.items[k]);
                if (!item) {
                    Py_DECREF(list);
                    return nullptr;
                }
                PyList_SET_ITEM(list, Py_ssize_t(k), item);
            }
            return list;
        }
        case Node::OBJECT: {
            PyObject* dict = PyDict_New();
            if (!dict) return nullptr;
            for (size_t k = 0; k < node.items.size(); ++k) {
                PyObject* item = to_python(node.items[k]);
                PyObject* key = item ? PyUnicode_FromStringAndSize(
                                           node.keys[k].data(), Py_ssize_t(node.keys[k].size()))
                                     : nullptr;
                int failed = (!item || !key) ? -1 : PyDict_SetItem(dict, key, item);
                Py_XDECREF(key);
                Py_XDECREF(item);
                if (failed) {
                    Py_DECREF(dict);
                    return nullptr;
                }
            }
            return dict;
        }
    }
    Py_RETURN_NONE;
}

PyObject* text_or_none(const std::optional<std::string>& text) {
    if (!text) Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(text->data(), Py_ssize_t(text->size()));
}

uint64_t load8(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// Names repeat (a few hundred distinct among 100k+ events) and kernel names run to hundreds of
// bytes: hash the length and up to 24 bytes from the start, middle and end instead of every
// byte; the table's equality check settles collisions.
struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
        constexpr uint64_t K = 0x9E3779B97F4A7C15ull;
        uint64_t h = s.size() * K;
        if (s.size() >= 8) {
            h = (h ^ load8(s.data())) * K;
            h = (h ^ load8(s.data() + s.size() / 2 - 4 + (s.size() < 16 ? 4 - s.size() / 2 : 0)))
                * K;
            h = (h ^ load8(s.data() + s.size() - 8)) * K;
        } else {
            for (char c : s) h = (h ^ uint8_t(c)) * K;
        }
        return size_t(h ^ (h >> 29));
    }
};
using TextIds = std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>>;

// value → id in order of first appearance (traces.columns.Interner); None is a value too.
struct Interner {
    TextIds ids;
    int32_t none_id = -1;
    int32_t count = 0;
    std::vector<std::optional<std::string>> fresh;  // numbered since the last drain

    int32_t get(bool present, std::string_view text) {
        if (!present) {
            if (none_id < 0) {
                none_id = count++;
                fresh.emplace_back(std::nullopt);
            }
            return none_id;
        }
        auto found = ids.find(text);
        if (found != ids.end()) return found->second;
        ids.emplace(std::string(text), count);
        fresh.emplace_back(std::string(text));
        return count++;
    }

    PyObject* drain() {
        PyObject* list = PyList_New(Py_ssize_t(fresh.size()));
        if (!list) return nullptr;
        for (size_t k = 0; k < fresh.size(); ++k) {
            PyObject* item = text_or_none(fresh[k]);
            if (!item) {
                Py_DECREF(list);
                return nullptr;
            }
            PyList_SET_ITEM(list, Py_ssize_t(k), item);
        }
        fresh.clear();
        return list;
    }
};

struct Patch {  // a kept row's integer given as text: Python applies HTA's int() rule
    int64_t row;
    int column;
    std::string text;
};

struct RowExtras {
    int64_t row;
    std::vector<std::pair<int, Node>> values;  // (Extra, value), in file order
    int64_t dims = -1;  // Input Dims: id of its JSON text (shared value per distinct text)
};

struct Absurd {
    int64_t event = -1;
    const char* field = nullptr;
    double value = 0;
};

// What one event holds of interest, reset per event.
struct Event {
    bool has_cat = false, has_name = false;
    std::string_view cat, name;
    int ts_kind = 0, dur_kind = 0;  // 0 missing/null, 1 int, 2 float
    double ts = 0, dur = 0;
    int64_t ints[N_COLUMNS];
    std::string_view texts[N_COLUMNS];  // integer columns given as strings
    bool is_text[N_COLUMNS];
    std::vector<std::pair<int, Node>> extras;
    std::string_view dims;
    bool has_dims = false;

    void reset() {
        has_cat = has_name = has_dims = false;
        ts_kind = dur_kind = 0;
        for (int c = C_PID; c < N_COLUMNS; ++c) {
            ints[c] = -1;
            is_text[c] = false;
        }
        extras.clear();
    }
};

struct Outputs {
    char* data[N_COLUMNS];
    int64_t capacity;
};

struct Batch {
    int64_t events = 0;
    int64_t rows = 0;
    int flags = 0;
    Absurd bad_ts, bad_dur;
    std::vector<Patch> patches;
    std::vector<RowExtras> extras;
    bool has_events = false;  // document(): a traceEvents array was found
    std::vector<std::pair<std::string, Node>> meta;  // document(): the other top-level keys
};

// What a scalar token is, from its first character (a cheap peek: nothing is consumed).
enum Scalar { S_NULL, S_NUMBER, S_TEXT, S_OTHER };

Scalar scalar_of(od::value& value) {
    std::string_view token = value.raw_json_token();
    char first = token.empty() ? '\0' : token[0];
    if (first == '"') return S_TEXT;
    if (first == 'n') {
        if (!take(value.is_null(), "null")) unsupported("bad literal");
        return S_NULL;
    }
    if (first == '-' || (first >= '0' && first <= '9')) return S_NUMBER;
    return S_OTHER;
}

// A number token written as a float (fraction or exponent), not an integer: simdjson's
// get_double() also takes integers too wide for 64 bits, which Python keeps as ints.
bool float_shaped(od::value& value) {
    for (char c : value.raw_json_token()) {
        if (c == '.' || c == 'e' || c == 'E') return true;
        if (c != '-' && c != '+' && (c < '0' || c > '9')) break;
    }
    return false;
}

// An integer token that fits 64 bits: int64, or uint64 as the bits of an int64 (two's
// complement, the wrap of columns.as_int). false for anything else.
bool integer_of(od::value& value, int64_t& out, double& as_double) {
    if (value.get_int64().get(out) == simdjson::SUCCESS) [[likely]] {
        as_double = double(out);
        return true;
    }
    uint64_t as_uint = 0;
    if (value.get_uint64().get(as_uint) == simdjson::SUCCESS) {
        out = int64_t(as_uint);
        as_double = double(as_uint);
        return true;
    }
    return false;
}

// ts or dur in µs: 0 missing/null, 1 int, 2 float (the Python type the reference would see).
// Once a float was seen (``float_seen``), the kind no longer matters: parse as a double.
int read_time(od::value value, double& out, bool float_seen) {
    if (float_seen && value.get_double().get(out) == simdjson::SUCCESS) [[likely]] return 2;
    int64_t as_int = 0;
    if (integer_of(value, as_int, out)) return 1;
    if (value.get_double().get(out) == simdjson::SUCCESS) {
        if (float_shaped(value)) return 2;
        unsupported("an integer time beyond 64 bits");
    }
    if (scalar_of(value) == S_NULL) return 0;
    unsupported("ts or dur is not a number");  // text: the reference parses float("…")
}

// An integer column's value by HTA's int() rule: ints (beyond int64: two's complement, as
// columns.as_int), floats truncated, null → -1; text is returned for Python to convert.
void read_int(od::value value, int64_t& out, std::string_view& text, bool& is_text) {
    is_text = false;
    double unused = 0;
    if (integer_of(value, out, unused)) [[likely]] return;
    switch (scalar_of(value)) {
        case S_NULL:
            out = -1;
            return;
        case S_NUMBER: {
            double d = take(value.get_double(), "int value");
            if (!float_shaped(value)) unsupported("an integer beyond 64 bits");
            if (!(std::fabs(d) < INT64_LIMIT)) unsupported("float id beyond int64");
            out = int64_t(d);
            return;
        }
        case S_TEXT:
            text = take(value.get_string(), "int text");
            is_text = true;
            return;
        default:
            unsupported("id is not a number");
    }
}

// A string's text: as written when it has no escape (no copy), else unescaped by simdjson.
// false for null.
bool read_text(od::value& value, std::string_view& out) {
    std::string_view token = value.raw_json_token();
    if (!token.empty() && token[0] == '"') {
        size_t end = token.find_last_of('"');
        if (end > 0 && std::memchr(token.data() + 1, '\\', end - 1) == nullptr) [[likely]] {
            out = token.substr(1, end - 1);
            return true;
        }
        out = take(value.get_string(), "text");
        return true;
    }
    if (scalar_of(value) == S_NULL) return false;
    unsupported("cat or name is not text");
}

// A key's text as written. Kineto never escapes its keys; one that does sends the file to
// msgspec, which unescapes (the bytes up to the closing quote are inside the document).
inline std::string_view key_of(od::raw_json_string key) {
    const char* start = key.raw();
    const char* end = start;
    while (*end != '"') {
        if (*end == '\\') unsupported("escaped key");
        ++end;
    }
    return {start, size_t(end - start)};
}

// Keys read, by object: codes below N_COLUMNS are columns, then the extras.
enum Key : int {
    K_NONE = -1,
    K_TS = 100, K_DUR, K_CAT, K_NAME, K_PID, K_TID, K_ARGS,
    K_EXTRA = 200,  // + Extra
};

int event_key(std::string_view key) {
    switch (key.size()) {
        case 2:
            return key == "ts" ? K_TS : K_NONE;
        case 3:
            if (key == "dur") return K_DUR;
            if (key == "cat") return K_CAT;
            if (key == "pid") return K_PID;
            if (key == "tid") return K_TID;
            return K_NONE;
        case 4:
            if (key == "name") return K_NAME;
            if (key == "args") return K_ARGS;
            return K_NONE;
        default:
            return K_NONE;
    }
}

constexpr int extra(Extra x) { return int(K_EXTRA) + int(x); }

int args_key(std::string_view key) {
    auto is = [&key](Extra x) { return key == EXTRA_KEY[x]; };
    switch (key.size()) {
        case 5:
            if (key == "bytes") return C_BYTES;
            return is(X_DTYPE) ? extra(X_DTYPE) : K_NONE;
        case 6:
            if (key == "stream") return C_STREAM;
            if (key == "device") return C_DEVICE;
            return K_NONE;
        case 8:
            return is(X_COMMS_ID) ? extra(X_COMMS_ID) : K_NONE;
        case 10:
            if (is(X_INPUT_DIMS)) return extra(X_INPUT_DIMS);
            return is(X_GROUP_SIZE) ? extra(X_GROUP_SIZE) : K_NONE;
        case 11:
            if (key == "External id") return C_EXTERNAL_ID;
            if (key == "correlation") return C_CORRELATION;
            return K_NONE;
        case 13:
            return is(X_IN_NELEMS) ? extra(X_IN_NELEMS) : K_NONE;
        case 14:
            if (is(X_OUT_NELEMS)) return extra(X_OUT_NELEMS);
            if (is(X_SYNC_KIND)) return extra(X_SYNC_KIND);
            return is(X_WAIT_STREAM) ? extra(X_WAIT_STREAM) : K_NONE;
        case 15:
            return is(X_COLLECTIVE_NAME) ? extra(X_COLLECTIVE_NAME) : K_NONE;
        case 18:
            return is(X_PG_NAME) ? extra(X_PG_NAME) : K_NONE;
        case 19:
            return is(X_PG_RANKS) ? extra(X_PG_RANKS) : K_NONE;
        case 23:
            return is(X_MEMORY_BANDWIDTH) ? extra(X_MEMORY_BANDWIDTH) : K_NONE;
        case 25:
            return is(X_PG_DESC) ? extra(X_PG_DESC) : K_NONE;
        case 33:
            return is(X_WAIT_CORR) ? extra(X_WAIT_CORR) : K_NONE;
        default:
            return K_NONE;
    }
}

// Nothing but whitespace after the value read (simdjson 3.0's document has no at_end()).
bool at_end(od::document& doc) {
    const char* where = nullptr;
    return doc.current_location().get(where) == simdjson::OUT_OF_BOUNDS;
}

class Walker {
   public:
    Walker(Interner& names, Interner& cats, const std::vector<std::string>& matmul,
           TextIds& dims_ids, std::vector<std::string>& dims_fresh)
        : names_(names), cats_(cats), matmul_(matmul), dims_ids_(dims_ids),
          dims_fresh_(dims_fresh) {}

    void events(od::array array, const Outputs& out, int64_t event0, Batch& batch) {
        flags_ = batch.flags;
        for (auto item : array) {
            od::object object = take(take(std::move(item), "event").get_object(), "event object");
            event_.reset();
            read_event(object);
            keep(out, event0, batch);
            batch.events++;
        }
        batch.flags = flags_;
    }

   private:
    void read_event(od::object& object) {
        for (auto field : object) {
            int key = event_key(key_of(take(field.key(), "event key")));
            if (key == K_NONE) continue;
            od::value value = take(field.value(), "event value");
            switch (key) {
                case K_TS:
                    event_.ts_kind = read_time(value, event_.ts, (flags_ & TS_FLOAT) != 0);
                    break;
                case K_DUR:
                    event_.dur_kind = read_time(value, event_.dur, (flags_ & DUR_FLOAT) != 0);
                    break;
                case K_CAT:
                    event_.has_cat = read_text(value, event_.cat);
                    break;
                case K_NAME:
                    event_.has_name = read_text(value, event_.name);
                    break;
                case K_PID:
                    read_int(value, event_.ints[C_PID], event_.texts[C_PID], event_.is_text[C_PID]);
                    break;
                case K_TID:
                    read_int(value, event_.ints[C_TID], event_.texts[C_TID], event_.is_text[C_TID]);
                    break;
                default:
                    read_args(value);
            }
        }
    }

    void read_args(od::value value) {
        // a key given twice: the last one counts, for these columns as for the extras
        for (int c = C_STREAM; c < N_COLUMNS; ++c) {
            event_.ints[c] = -1;
            event_.is_text[c] = false;
        }
        event_.extras.clear();
        event_.has_dims = false;
        std::string_view token = value.raw_json_token();
        if (!token.empty() && token[0] == 'n') {
            if (!take(value.is_null(), "null")) unsupported("bad literal");
            return;
        }
        od::object args;
        if (value.get_object().get(args) != simdjson::SUCCESS) unsupported("args is not an object");
        for (auto field : args) {
            int key = args_key(key_of(take(field.key(), "args key")));
            if (key == K_NONE) continue;
            od::value v = take(field.value(), "args value");
            if (key < N_COLUMNS) {
                read_int(v, event_.ints[key], event_.texts[key], event_.is_text[key]);
                continue;
            }
            int extra = key - K_EXTRA;
            if (extra == X_INPUT_DIMS) {
                // only a matmul op's are kept (the name comes first in Kineto's key order)
                if (event_.has_name && !is_matmul()) continue;
                // its JSON text: the same shapes repeat every layer and step, so rows share
                // one decoded value per distinct text (as the reference does)
                if (take(v.type(), "dims type") == od::json_type::array) {
                    event_.dims = take(take(v.get_array(), "dims").raw_json(), "dims text");
                } else if (take(v.type(), "dims type") == od::json_type::object) {
                    event_.dims = take(take(v.get_object(), "dims").raw_json(), "dims text");
                } else {
                    event_.dims = v.raw_json_token();
                }
                event_.has_dims = true;
                continue;
            }
            Node node = read_node(v);
            for (auto& have : event_.extras) {
                if (have.first == extra) {
                    have.second = std::move(node);
                    extra = -1;
                    break;
                }
            }
            if (extra >= 0) event_.extras.emplace_back(extra, std::move(node));
        }
    }

    bool is_matmul() const {
        if (!event_.has_name || event_.name.size() < 7 || event_.name[0] != 'a') return false;
        for (const auto& op : matmul_) {
            if (op == event_.name) return true;
        }
        return false;
    }

    // Rows are numbered from the start of the columns given (the caller passes their free part).
    void keep(const Outputs& out, int64_t event0, Batch& batch) {
        int32_t cat_id = cats_.get(event_.has_cat, event_.cat);
        if (event_.ts_kind == 0) flags_ |= TS_NONE;
        if (event_.ts_kind == 2) flags_ |= TS_FLOAT;
        if (event_.dur_kind == 0) flags_ |= DUR_NONE;
        if (event_.dur_kind == 2) flags_ |= DUR_FLOAT;
        if (!event_.has_cat || event_.cat == "Trace" || event_.dur_kind == 0) return;
        // a dur but no ts: the reference drops the event and counts it (SKIP_REASONS)
        if (event_.ts_kind == 0) unsupported("an event with a dur and no ts");
        int64_t r = batch.rows;
        if (r >= out.capacity) unsupported("column reservation too small");
        int64_t index = event0 + batch.events;
        if (std::fabs(event_.ts) > MAX_TIME_US && batch.bad_ts.event < 0) {
            batch.bad_ts = Absurd{index, "ts", event_.ts};
        }
        if (std::fabs(event_.dur) > MAX_TIME_US && batch.bad_dur.event < 0) {
            batch.bad_dur = Absurd{index, "dur", event_.dur};
        }
        reinterpret_cast<int64_t*>(out.data[C_INDEX])[r] = index;
        reinterpret_cast<double*>(out.data[C_TS])[r] = event_.ts;
        reinterpret_cast<double*>(out.data[C_DUR])[r] = event_.dur;
        reinterpret_cast<int32_t*>(out.data[C_CAT_ID])[r] = cat_id;
        reinterpret_cast<int32_t*>(out.data[C_NAME_ID])[r] =
            names_.get(event_.has_name, event_.name);
        for (int c = C_PID; c < N_COLUMNS; ++c) {
            reinterpret_cast<int64_t*>(out.data[c])[r] = event_.ints[c];
            if (event_.is_text[c]) batch.patches.push_back({r, c, std::string(event_.texts[c])});
        }
        bool dims = event_.has_dims && is_matmul();
        if (!event_.extras.empty() || dims) {
            RowExtras row{r, std::move(event_.extras), -1};
            event_.extras = {};
            if (dims) row.dims = dims_id(event_.dims);
            batch.extras.push_back(std::move(row));
        }
        batch.rows++;
    }

    int64_t dims_id(std::string_view text) {
        auto found = dims_ids_.find(text);
        if (found != dims_ids_.end()) return found->second;
        int32_t id = int32_t(dims_ids_.size());
        dims_ids_.emplace(std::string(text), id);
        dims_fresh_.emplace_back(text);
        return id;
    }

    Interner& names_;
    Interner& cats_;
    const std::vector<std::string>& matmul_;
    TextIds& dims_ids_;
    std::vector<std::string>& dims_fresh_;
    Event event_;
    int flags_ = 0;  // Flag bits of the batch so far
};

// ---------------------------------------------------------------------------------------------
// The Python type

PyObject* UnsupportedError = nullptr;

struct ScannerObject {
    PyObject_HEAD
    // One file's parser: its buffers grow to the largest batch and are freed with the file, so
    // they are not resident while the analyses run (the loader then trims the heap).
    od::parser* batch_parser;
    od::parser* dims_parser;
    Interner* names;
    Interner* cats;
    std::vector<std::string>* matmul;
    TextIds* dims_ids;
    std::vector<std::string>* dims_fresh;
    PyObject* dims_values;  // list: dims id → decoded value (shared between rows)
    std::string* padded;  // a copy of the input with simdjson's padding
    bool busy;
};

void scanner_dealloc(ScannerObject* self) {
    delete self->batch_parser;
    delete self->dims_parser;
    delete self->names;
    delete self->cats;
    delete self->matmul;
    delete self->dims_ids;
    delete self->dims_fresh;
    delete self->padded;
    Py_XDECREF(self->dims_values);
    PyTypeObject* type = Py_TYPE(self);
    freefunc free = reinterpret_cast<freefunc>(PyType_GetSlot(type, Py_tp_free));
    free(self);
    Py_DECREF(type);  // heap types are referenced by their instances
}

int scanner_init(ScannerObject* self, PyObject* args, PyObject* kwargs) {
    static const char* keywords[] = {"matmul_ops", nullptr};
    if (self->names) {
        PyErr_SetString(PyExc_RuntimeError, "Scanner already initialised");
        return -1;
    }
    PyObject* ops = nullptr;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", const_cast<char**>(keywords), &ops)) {
        return -1;
    }
    PyObject* seq = PySequence_Fast(ops, "matmul_ops must be a sequence of str");
    if (!seq) return -1;
    auto matmul = new std::vector<std::string>();
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); ++k) {
        Py_ssize_t size = 0;
        const char* text = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, k), &size);
        if (!text) {
            delete matmul;
            Py_DECREF(seq);
            return -1;
        }
        matmul->emplace_back(text, size_t(size));
    }
    Py_DECREF(seq);
    self->batch_parser = new od::parser();
    self->dims_parser = new od::parser();
    self->names = new Interner();
    self->cats = new Interner();
    self->matmul = matmul;
    self->dims_ids = new TextIds();
    self->dims_fresh = new std::vector<std::string>();
    self->dims_values = PyList_New(0);
    self->padded = new std::string();
    self->busy = false;
    return self->dims_values ? 0 : -1;
}

bool columns_from(PyObject* columns, Py_buffer* views, Outputs& out) {
    if (!PyTuple_Check(columns) || PyTuple_GET_SIZE(columns) != N_COLUMNS) {
        PyErr_SetString(PyExc_TypeError, "columns must be a tuple of 12 arrays");
        return false;
    }
    out.capacity = INT64_MAX;
    for (int c = 0; c < N_COLUMNS; ++c) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(columns, c), &views[c],
                               PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
            for (int k = 0; k < c; ++k) PyBuffer_Release(&views[k]);
            return false;
        }
        const char* format = views[c].format ? views[c].format : "B";
        char kind = (format[0] == 'd' || format[0] == 'f') ? 'f' : 'i';
        if (views[c].itemsize != ITEMSIZE[c] || kind != KIND[c]) {
            for (int k = 0; k <= c; ++k) PyBuffer_Release(&views[k]);
            PyErr_Format(PyExc_TypeError, "column %d has the wrong dtype", c);
            return false;
        }
        out.data[c] = static_cast<char*>(views[c].buf);
        out.capacity = std::min<int64_t>(out.capacity, views[c].len / views[c].itemsize);
    }
    return true;
}

PyObject* extras_to_python(ScannerObject* self, const Batch& batch) {
    // decode the Input Dims texts met for the first time (few: shapes repeat)
    for (const std::string& text : *self->dims_fresh) {
        PyObject* value = nullptr;
        try {
            simdjson::padded_string padded(text);
            od::document doc = take(self->dims_parser->iterate(padded), "dims");
            Node node = read_node(take(doc.get_value(), "dims value"));
            if (!at_end(doc)) unsupported("dims trailing text");
            value = to_python(node);
        } catch (const Unsupported& exc) {
            PyErr_SetString(UnsupportedError, exc.why.c_str());
            return nullptr;
        }
        if (!value || PyList_Append(self->dims_values, value) < 0) {
            Py_XDECREF(value);
            return nullptr;
        }
        Py_DECREF(value);
    }
    self->dims_fresh->clear();
    PyObject* list = PyList_New(Py_ssize_t(batch.extras.size()));
    if (!list) return nullptr;
    for (size_t k = 0; k < batch.extras.size(); ++k) {
        const RowExtras& row = batch.extras[k];
        PyObject* dict = PyDict_New();
        PyObject* item = dict ? Py_BuildValue("(LN)", (long long)row.row, dict) : nullptr;
        if (!item) {
            Py_DECREF(list);
            return nullptr;
        }
        PyList_SET_ITEM(list, Py_ssize_t(k), item);
        for (const auto& [extra, node] : row.values) {
            PyObject* value = to_python(node);
            if (extra == X_MEMORY_BANDWIDTH && value && PyLong_CheckExact(value)) {
                // the reference decodes it as a float field (an int there becomes a float)
                PyObject* as_float = PyNumber_Float(value);
                Py_DECREF(value);
                value = as_float;
            }
            int failed = value ? PyDict_SetItemString(dict, EXTRA_KEY[extra].data(), value) : -1;
            Py_XDECREF(value);
            if (failed) {
                Py_DECREF(list);
                return nullptr;
            }
        }
        if (row.dims >= 0) {
            PyObject* value = PyList_GET_ITEM(self->dims_values, row.dims);
            if (PyDict_SetItemString(dict, "Input Dims", value) < 0) {
                Py_DECREF(list);
                return nullptr;
            }
        }
    }
    return list;
}

PyObject* patches_to_python(const Batch& batch) {
    PyObject* list = PyList_New(Py_ssize_t(batch.patches.size()));
    if (!list) return nullptr;
    for (size_t k = 0; k < batch.patches.size(); ++k) {
        const Patch& p = batch.patches[k];
        PyObject* item = Py_BuildValue("(Lis#)", (long long)p.row, p.column, p.text.data(),
                                       Py_ssize_t(p.text.size()));
        if (!item) {
            Py_DECREF(list);
            return nullptr;
        }
        PyList_SET_ITEM(list, Py_ssize_t(k), item);
    }
    return list;
}

PyObject* absurd_to_python(const Batch& batch) {
    const Absurd& bad = batch.bad_ts.event >= 0 ? batch.bad_ts : batch.bad_dur;
    if (bad.event < 0) Py_RETURN_NONE;
    return Py_BuildValue("(Lsd)", (long long)bad.event, bad.field, bad.value);
}

PyObject* meta_to_python(const Batch& batch) {
    PyObject* dict = PyDict_New();
    if (!dict) return nullptr;
    for (const auto& [key, node] : batch.meta) {
        PyObject* value = to_python(node);
        int failed = value ? PyDict_SetItemString(dict, key.c_str(), value) : -1;
        Py_XDECREF(value);
        if (failed) {
            Py_DECREF(dict);
            return nullptr;
        }
    }
    return dict;
}

constexpr std::string_view META_KEYS[] = {
    "schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds"};

// scan(data, length, columns, event0, document) — see traces.native.NativeBuilder
PyObject* scanner_scan(ScannerObject* self, PyObject* args) {
    Py_buffer data;
    PyObject* columns = nullptr;
    Py_ssize_t length = 0;
    long long event0 = 0;
    int document = 0;
    if (!PyArg_ParseTuple(args, "y*nOLp", &data, &length, &columns, &event0, &document)) {
        return nullptr;
    }
    if (length < 0 || length > data.len) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "length is beyond the data");
        return nullptr;
    }
    if (self->busy) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_RuntimeError, "a Scanner is not shared between threads");
        return nullptr;
    }
    Py_buffer views[N_COLUMNS];
    Outputs out;
    if (!columns_from(columns, views, out)) {
        PyBuffer_Release(&data);
        return nullptr;
    }
    self->busy = true;
    Batch batch;
    std::string why;
    bool failed = false;
    Py_BEGIN_ALLOW_THREADS
    try {
        // simdjson reads up to SIMDJSON_PADDING bytes past the end (their content does not
        // matter): the caller's bytes after the batch serve, else a copy with room
        const char* json = static_cast<const char*>(data.buf);
        size_t size = size_t(length), allocated = size_t(data.len);
        if (allocated - size < simdjson::SIMDJSON_PADDING) {
            std::string& padded = *self->padded;
            if (padded.size() < size + simdjson::SIMDJSON_PADDING) {
                padded.resize(size + simdjson::SIMDJSON_PADDING);
            }
            std::memcpy(padded.data(), json, size);
            json = padded.data();
            allocated = padded.size();
        }
        // grow the parser geometrically: batches differ by a few bytes, and each reallocation
        // is fresh memory to fault in
        od::document doc = take(self->batch_parser->iterate(json, size, allocated), "document");
        Walker walker(*self->names, *self->cats, *self->matmul, *self->dims_ids,
                      *self->dims_fresh);
        if (!document) {
            walker.events(take(doc.get_array(), "traceEvents batch"), out, event0, batch);
        } else {
            for (auto field_result : take(doc.get_object(), "top-level object")) {
                od::field field = take(std::move(field_result), "top-level field");
                std::string_view key = take(field.unescaped_key(), "top-level key");
                od::value value = field.value();
                if (key == "traceEvents") {
                    if (batch.has_events) unsupported("traceEvents twice");
                    walker.events(take(value.get_array(), "traceEvents"), out, event0, batch);
                    batch.has_events = true;
                    continue;
                }
                for (std::string_view meta : META_KEYS) {
                    if (key != meta) continue;
                    Node node = read_node(value);
                    bool replaced = false;
                    for (auto& have : batch.meta) {
                        if (have.first == key) {
                            have.second = std::move(node);
                            replaced = true;
                        }
                    }
                    if (!replaced) batch.meta.emplace_back(std::string(key), std::move(node));
                    break;
                }
            }
        }
        if (document && !batch.has_events) unsupported("no traceEvents array");
        if (!at_end(doc)) unsupported("text after the JSON value");
    } catch (const Unsupported& exc) {
        failed = true;
        why = exc.why;
    } catch (const std::bad_alloc&) {
        failed = true;
        why = "out of memory";
    }
    Py_END_ALLOW_THREADS
    self->busy = false;
    for (int c = 0; c < N_COLUMNS; ++c) PyBuffer_Release(&views[c]);
    PyBuffer_Release(&data);
    if (failed) {
        // names numbered by a failed batch stay numbered: the caller drops this scanner
        if (why == "out of memory") return PyErr_NoMemory();
        PyErr_SetString(UnsupportedError, why.c_str());
        return nullptr;
    }
    PyObject* new_cats = self->cats->drain();
    PyObject* new_names = new_cats ? self->names->drain() : nullptr;
    PyObject* extras = new_names ? extras_to_python(self, batch) : nullptr;
    PyObject* patches = extras ? patches_to_python(batch) : nullptr;
    PyObject* absurd = patches ? absurd_to_python(batch) : nullptr;
    PyObject* meta = nullptr;
    if (absurd) meta = document ? meta_to_python(batch) : Py_NewRef(Py_None);
    if (!meta) {
        Py_XDECREF(new_cats);
        Py_XDECREF(new_names);
        Py_XDECREF(extras);
        Py_XDECREF(patches);
        Py_XDECREF(absurd);
        return nullptr;
    }
    return Py_BuildValue("(LLNNNNiNN)", (long long)batch.events, (long long)batch.rows, new_cats,
                         new_names, extras, patches, batch.flags, absurd, meta);
}

PyMethodDef scanner_methods[] = {
    {"scan", reinterpret_cast<PyCFunction>(scanner_scan), METH_VARARGS,
     "scan(data, length, columns, event0, document) -> (events, rows, new_cats, new_names, "
     "extras, patches, flags, absurd, meta)"},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot scanner_slots[] = {
    {Py_tp_doc, const_cast<char*>("Decodes Kineto traceEvents batches into columns (one file's state).")},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_init, reinterpret_cast<void*>(scanner_init)},
    {Py_tp_dealloc, reinterpret_cast<void*>(scanner_dealloc)},
    {Py_tp_methods, scanner_methods},
    {0, nullptr},
};

PyType_Spec scanner_spec = {
    "gpuwarden.traces._kineto.Scanner", sizeof(ScannerObject), 0, Py_TPFLAGS_DEFAULT,
    scanner_slots,
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_kineto",
    "Kineto traceEvents to columns with simdjson (see gpuwarden.traces.native).", -1, nullptr,
    nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__kineto(void) {
    PyObject* module = PyModule_Create(&module_def);
    if (!module) return nullptr;
    PyObject* scanner_type = PyType_FromSpec(&scanner_spec);
    UnsupportedError = PyErr_NewException("gpuwarden.traces._kineto.UnsupportedError", nullptr, nullptr);
    if (!scanner_type || !UnsupportedError ||
        PyModule_AddObjectRef(module, "UnsupportedError", UnsupportedError) < 0 ||
        PyModule_AddObjectRef(module, "Scanner", scanner_type) < 0 ||
        PyModule_AddStringConstant(module, "SIMDJSON_VERSION", SIMDJSON_VERSION_TEXT) < 0) {
        Py_XDECREF(scanner_type);
        Py_DECREF(module);
        return nullptr;
    }
    Py_DECREF(scanner_type);
    return module;
}
