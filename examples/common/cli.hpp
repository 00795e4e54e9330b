// The command-line parser of smol's examples and tools: one table of options per
// program, from which both the parsing and the --help text come, so the two cannot
// drift apart. Header-only and independent of the library (tools/ use it too).
//
//   smol_cli::Parser cli("smol-tokenize", "Prints the token ids of a text as a JSON array.");
//   cli.option("-m, --model", model, "MODEL.gguf", "the vocabulary's file").required();
//   cli.option("-n", max_tokens, "N", "tokens to generate").at_least(0);
//   cli.flag("--no-special", no_special, "special tokens in the text stay plain text");
//   if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
//
// Options take their value from the next argument or after '=' (--temp=0.7), so a
// value may start with '-' (-p "-x"). A target's type decides the conversion:
// std::string, any integer or floating-point type (the whole argument must be the
// number, in range), std::optional<T> (set only when given) and
// std::vector<std::string> (repeatable: each use appends). Anything else goes
// through a callback that throws smol_cli::BadValue. parse() prints --help to
// stdout and returns 0; it reports an unknown option, a missing value, a bad
// number or a missing required option on stderr and returns 2 (the usual exit
// code for usage errors), and otherwise returns nullopt: run the program. As with
// getopt, an option given twice keeps its last value.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace smol_cli {

// What a value callback throws for a value it cannot use; the parser adds the
// option's name.
struct BadValue : std::runtime_error {
    using std::runtime_error::runtime_error;
};

namespace detail {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// The whole of `text` as a T, or BadValue. strto* rather than from_chars: the
// floating-point from_chars is missing from some of the standard libraries the
// examples are built with (mingw-w64's among them).
template <class T>
T to_number(const std::string& text) {
    const char* begin = text.c_str();
    char* end = nullptr;
    errno = 0;
    if constexpr (std::is_floating_point_v<T>) {
        const long double v = std::strtold(begin, &end);
        if (end == begin || *end != '\0' || !std::isfinite(v))
            throw BadValue("expects a number, not '" + text + "'");
        if (errno == ERANGE || std::fabs(v) > std::numeric_limits<T>::max())
            throw BadValue("'" + text + "' is out of range");
        return T(v);
    } else if constexpr (std::is_signed_v<T>) {
        const long long v = std::strtoll(begin, &end, 10);
        if (end == begin || *end != '\0') throw BadValue("expects an integer, not '" + text + "'");
        if (errno == ERANGE || v < std::numeric_limits<T>::min() ||
            v > std::numeric_limits<T>::max())
            throw BadValue("'" + text + "' is out of range");
        return T(v);
    } else {
        // strtoull accepts "-1" and wraps it; a count given as negative is a mistake.
        if (text.find('-') != std::string::npos)
            throw BadValue("expects a non-negative integer, not '" + text + "'");
        const unsigned long long v = std::strtoull(begin, &end, 10);
        if (end == begin || *end != '\0')
            throw BadValue("expects a non-negative integer, not '" + text + "'");
        if (errno == ERANGE || v > std::numeric_limits<T>::max())
            throw BadValue("'" + text + "' is out of range");
        return T(v);
    }
}

inline std::string format_bound(long double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.10Lg", v);
    return buf;
}

}  // namespace detail

// One row of the option table. Returned by Parser::option/flag/positional so that
// constraints can be chained; the Parser keeps it at a stable address.
class Option {
public:
    // The option must be given (an error names it otherwise).
    Option& required() {
        required_ = true;
        return *this;
    }
    // A lower bound, checked on the converted number (inclusive).
    Option& at_least(long double min) {
        min_ = min;
        return *this;
    }

private:
    friend class Parser;
    std::vector<std::string> names;  // "-m", "--model"; empty for a positional
    std::string metavar;             // "N", "FILE"; empty for a flag
    std::string help;
    std::function<void(const std::string&)> apply;           // converts and stores a value
    std::function<long double(const std::string&)> numeric;  // for at_least, when a number
    bool required_ = false;
    bool repeatable = false;
    bool seen = false;
    std::optional<long double> min_;

    bool takes_value() const { return !metavar.empty(); }
    std::string label() const { return names.empty() ? metavar : names.back(); }
};

class Parser {
public:
    // `program` names the program in messages; `summary` opens the --help text.
    Parser(std::string program, std::string summary)
        : program_(std::move(program)), summary_(std::move(summary)) {}

    // Text printed after the option list (examples, notes).
    void epilog(std::string text) { epilog_ = std::move(text); }

    // A value option: `names` is a comma-separated list ("-n, --n-predict").
    template <class T>
    Option& option(const std::string& names, T& target, std::string metavar, std::string help) {
        Option& o = add(names, std::move(metavar), std::move(help));
        if constexpr (std::is_same_v<T, std::string>) {
            o.apply = [&target](const std::string& v) { target = v; };
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            o.repeatable = true;
            o.apply = [&target](const std::string& v) { target.push_back(v); };
        } else if constexpr (detail::is_optional<T>::value) {
            using Value = typename T::value_type;
            if constexpr (std::is_same_v<Value, std::string>) {
                o.apply = [&target](const std::string& v) { target = v; };
            } else {
                static_assert(std::is_arithmetic_v<Value>, "std::optional of a string or a number");
                o.numeric = [](const std::string& v) {
                    return (long double)detail::to_number<Value>(v);
                };
                o.apply = [&target](const std::string& v) { target = detail::to_number<Value>(v); };
            }
        } else {
            static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                          "option(): a string, a number, an optional or a vector of strings; "
                          "use flag() for booleans and a callback for anything else");
            o.numeric = [](const std::string& v) { return (long double)detail::to_number<T>(v); };
            o.apply = [&target](const std::string& v) { target = detail::to_number<T>(v); };
        }
        return o;
    }

    // A value option converted by `parse`, which throws BadValue for a value it rejects.
    Option& option(const std::string& names, std::function<void(const std::string&)> parse,
                   std::string metavar, std::string help) {
        Option& o = add(names, std::move(metavar), std::move(help));
        o.apply = std::move(parse);
        return o;
    }

    // A flag without a value: sets `target` to `value` (true unless told otherwise,
    // e.g. flag("--no-think", enable_thinking, "...", false)).
    Option& flag(const std::string& names, bool& target, std::string help, bool value = true) {
        Option& o = add(names, "", std::move(help));
        o.apply = [&target, value](const std::string&) { target = value; };
        return o;
    }

    // A flag that runs `action`.
    Option& flag(const std::string& names, std::function<void()> action, std::string help) {
        Option& o = add(names, "", std::move(help));
        o.apply = [action = std::move(action)](const std::string&) { action(); };
        return o;
    }

    // A positional argument, taken in the order of declaration.
    Option& positional(std::string metavar, std::string& target, std::string help) {
        positionals_.emplace_back();
        Option& o = positionals_.back();
        o.metavar = std::move(metavar);
        o.help = std::move(help);
        o.apply = [&target](const std::string& v) { target = v; };
        o.required_ = true;
        return o;
    }

    // nullopt: run the program; else its exit code (0 after --help, 2 after a usage
    // error, which is printed on stderr with a pointer to --help).
    std::optional<int> parse(int argc, const char* const* argv) {
        size_t next_positional = 0;
        bool options_done = false;  // after "--" everything is positional
        try {
            for (int i = 1; i < argc; ++i) {
                const std::string arg = argv[i];
                if (!options_done && arg == "--") {
                    options_done = true;
                    continue;
                }
                if (options_done || arg.size() < 2 || arg[0] != '-') {
                    if (next_positional >= positionals_.size())
                        throw BadValue("unexpected argument '" + arg + "'");
                    Option& p = positionals_[next_positional++];
                    store(p, arg);
                    continue;
                }
                if (arg == "-h" || arg == "--help") {
                    print_help(stdout);
                    return 0;
                }
                // --name=value for long options.
                std::string name = arg;
                std::optional<std::string> inline_value;
                const size_t eq = arg.find('=');
                if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
                    name = arg.substr(0, eq);
                    inline_value = arg.substr(eq + 1);
                }
                Option* o = find(name);
                if (!o) throw BadValue("unknown option '" + name + "'");
                if (!o->takes_value()) {
                    if (inline_value) throw BadValue(name + " takes no value");
                    o->seen = true;
                    o->apply("");
                    continue;
                }
                if (!inline_value && i + 1 >= argc)
                    throw BadValue(name + " needs a value (" + o->metavar + ")");
                store(*o, inline_value ? *inline_value : std::string(argv[++i]), name);
            }
            for (const Option& o : options_)
                if (o.required_ && !o.seen)
                    throw BadValue(o.label() + " " + o.metavar + " is required");
            for (const Option& p : positionals_)
                if (p.required_ && !p.seen) throw BadValue(p.metavar + " is required");
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: %s\n%s\nRun '%s --help' for the options.\n", program_.c_str(),
                         e.what(), usage_line().c_str(), program_.c_str());
            return 2;
        }
        return std::nullopt;
    }
    std::optional<int> parse(int argc, char** argv) {
        return parse(argc, const_cast<const char* const*>(argv));
    }

    // "usage: PROGRAM [options] POSITIONAL..."
    std::string usage_line() const {
        std::string line = "usage: " + program_ + " [options]";
        for (const Option& p : positionals_) line += " " + p.metavar;
        return line;
    }

    void print_help(std::FILE* out) const {
        std::fprintf(out, "%s\n%s\n", usage_line().c_str(), summary_.c_str());
        std::vector<std::pair<std::string, const Option*>> rows;
        for (const Option& p : positionals_) rows.emplace_back(p.metavar, &p);
        for (const Option& o : options_) {
            std::string left;
            for (const std::string& n : o.names) left += (left.empty() ? "" : ", ") + n;
            if (o.takes_value()) left += " " + o.metavar;
            rows.emplace_back(left, &o);
        }
        rows.emplace_back("-h, --help", nullptr);
        size_t width = 0;
        for (const auto& row : rows) width = std::max(width, row.first.size());
        width = std::min<size_t>(width, 26);  // longer names put their help on the next line
        std::fprintf(out, "\n");
        for (const auto& [left, o] : rows) {
            std::string help = o ? o->help : "print this help and exit";
            if (o && o->required_) help += " (required)";
            if (o && o->repeatable) help += " (repeatable)";
            const std::string indent(2 + width + 2, ' ');
            std::string text = "  " + left;
            if (left.size() > width)
                text += "\n" + indent;
            else
                text += std::string(width - left.size() + 2, ' ');
            for (char c : help) {  // continuation lines of a multi-line help line up
                text += c;
                if (c == '\n') text += indent;
            }
            std::fprintf(out, "%s\n", text.c_str());
        }
        if (!epilog_.empty()) std::fprintf(out, "\n%s\n", epilog_.c_str());
    }

private:
    Option& add(const std::string& names, std::string metavar, std::string help) {
        options_.emplace_back();
        Option& o = options_.back();
        size_t start = 0;
        while (start < names.size()) {
            size_t comma = names.find(',', start);
            if (comma == std::string::npos) comma = names.size();
            std::string name = names.substr(start, comma - start);
            name.erase(0, name.find_first_not_of(' '));
            name.erase(name.find_last_not_of(' ') + 1);
            if (!name.empty()) o.names.push_back(name);
            start = comma + 1;
        }
        o.metavar = std::move(metavar);
        o.help = std::move(help);
        return o;
    }

    Option* find(const std::string& name) {
        for (Option& o : options_)
            for (const std::string& n : o.names)
                if (n == name) return &o;
        return nullptr;
    }

    static void store(Option& o, const std::string& value, const std::string& as = "") {
        const std::string name = as.empty() ? o.label() : as;
        try {
            if (o.numeric && o.min_ && o.numeric(value) < *o.min_)
                throw BadValue("must be at least " + detail::format_bound(*o.min_) + ", not " +
                               value);
            o.apply(value);
        } catch (const std::exception& e) {  // BadValue, or a callback's std::invalid_argument
            throw BadValue(name + ": " + e.what());
        }
        o.seen = true;
    }

    std::string program_, summary_, epilog_;
    std::deque<Option> options_, positionals_;  // deque: Option& stays valid as rows are added
};

}  // namespace smol_cli
