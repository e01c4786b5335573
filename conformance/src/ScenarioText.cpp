//===- ScenarioText.cpp - Scenario text form ------------------------------===//
#include "drt/conformance/ScenarioText.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <optional>

namespace drt::conformance {

std::string ParseError::toString() const {
  return std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

namespace {

struct Token {
  std::string_view text;
  int column = 0;
};

/// Thrown inside the parser, caught at the top: a line's first problem.
struct LineError {
  int column;
  std::string message;
};

std::vector<Token> tokenize(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    if (i >= line.size())
      break;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    out.push_back({line.substr(start, i - start), int(start) + 1});
  }
  return out;
}

/// \p s in quotes for a message: bytes outside printable ASCII as \xNN, and
/// cut after 40 characters, so that a hostile input never floods a terminal
/// or writes control bytes to it.
std::string quoted(std::string_view s) {
  constexpr size_t Shown = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < Shown; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
      continue;
    }
    const char *hex = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  out += "'";
  if (s.size() > Shown)
    out += " (" + std::to_string(s.size()) + " bytes, cut)";
  return out;
}

std::optional<uint64_t> parseUnsigned(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

std::optional<double> parseDouble(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

bool isName(std::string_view s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'))
      return false;
  return true;
}

constexpr const char *PatternWhat =
    "a fill pattern (a number, or a value class specials, extremes, "
    "rounding or random, with an optional :VARIANT as in random:7)";

class LineParser {
public:
  LineParser(std::vector<Token> tokens, int endColumn)
      : tokens_(std::move(tokens)), endColumn_(endColumn) {}

  bool atEnd() const { return pos_ >= tokens_.size(); }
  const Token *peek() const { return atEnd() ? nullptr : &tokens_[pos_]; }

  [[noreturn]] void fail(const std::string &what) const {
    if (atEnd())
      throw LineError{endColumn_, "expected " + what + ", found end of line"};
    throw LineError{tokens_[pos_].column, "expected " + what + ", found " +
                                              quoted(tokens_[pos_].text)};
  }

  Token next(const std::string &what) {
    if (atEnd())
      fail(what);
    return tokens_[pos_++];
  }

  std::string name(const std::string &what) {
    if (atEnd() || !isName(tokens_[pos_].text))
      fail(what);
    return std::string(tokens_[pos_++].text);
  }

  uint64_t number(const std::string &what) {
    if (atEnd())
      fail(what);
    auto v = parseUnsigned(tokens_[pos_].text);
    if (!v)
      fail(what);
    ++pos_;
    return *v;
  }

  /// "key=VALUE" with an unsigned value of at most \p max; nullopt when the
  /// next token is not "key=...".
  std::optional<uint64_t>
  keyNumber(std::string_view key,
            uint64_t max = std::numeric_limits<uint64_t>::max()) {
    if (atEnd())
      return std::nullopt;
    std::string_view t = tokens_[pos_].text;
    if (t.substr(0, key.size() + 1) != std::string(key) + "=")
      return std::nullopt;
    auto v = parseUnsigned(t.substr(key.size() + 1));
    if (!v)
      throw LineError{tokens_[pos_].column + int(key.size()) + 1,
                      "expected a number after " + std::string(key) +
                          "=, found " + quoted(t.substr(key.size() + 1))};
    if (*v > max)
      throw LineError{tokens_[pos_].column + int(key.size()) + 1,
                      std::string(key) + "= must be at most " +
                          std::to_string(max) + ", found " +
                          quoted(t.substr(key.size() + 1))};
    ++pos_;
    return v;
  }

  /// "key=NAME"; nullopt when the next token is not "key=...".
  std::optional<std::string> keyName(std::string_view key) {
    if (atEnd())
      return std::nullopt;
    std::string_view t = tokens_[pos_].text;
    if (t.substr(0, key.size() + 1) != std::string(key) + "=")
      return std::nullopt;
    if (t.size() == key.size() + 1)
      throw LineError{tokens_[pos_].column + int(key.size()) + 1,
                      "expected a device name after " + std::string(key) + "="};
    ++pos_;
    return std::string(t.substr(key.size() + 1));
  }

  /// A fill pattern (parsePattern).
  uint64_t pattern() {
    if (atEnd())
      fail(PatternWhat);
    auto v = parsePattern(tokens_[pos_].text);
    if (!v)
      fail(PatternWhat);
    ++pos_;
    return *v;
  }

  /// "fill=PATTERN"; nullopt when the next token is not "fill=...".
  std::optional<uint64_t> fillPattern() {
    if (atEnd() || tokens_[pos_].text.substr(0, 5) != "fill=")
      return std::nullopt;
    std::string_view text = tokens_[pos_].text.substr(5);
    auto v = parsePattern(text);
    if (!v)
      throw LineError{tokens_[pos_].column + 5,
                      "expected " + std::string(PatternWhat) +
                          " after fill=, found " + quoted(text)};
    ++pos_;
    return v;
  }

  ElemKind elemKind() {
    const std::string what = "an element kind (f32, i32, i64, u8, f16, bf16)";
    if (atEnd())
      fail(what);
    auto k = parseElemKind(tokens_[pos_].text);
    if (!k)
      fail(what);
    ++pos_;
    return *k;
  }

  std::vector<size_t> dims() {
    const std::string what = "dimensions like [2x3] or []";
    if (atEnd())
      fail(what);
    std::string_view t = tokens_[pos_].text;
    if (t.size() < 2 || t.front() != '[' || t.back() != ']')
      fail(what);
    std::vector<size_t> out;
    std::string_view body = t.substr(1, t.size() - 2);
    size_t start = 0;
    while (!body.empty() && start <= body.size()) {
      size_t x = body.find('x', start);
      std::string_view part = body.substr(start, x == std::string_view::npos
                                                     ? std::string_view::npos
                                                     : x - start);
      auto v = parseUnsigned(part);
      if (!v)
        throw LineError{tokens_[pos_].column + 1 + int(start),
                        "expected a dimension (a number), found " +
                            quoted(part)};
      out.push_back(size_t(*v));
      if (x == std::string_view::npos)
        break;
      start = x + 1;
    }
    ++pos_;
    return out;
  }

  NetworkNode node() {
    const std::string what = "a node like out=add(a,b) or out=scale(a,0.5)";
    if (atEnd())
      fail(what);
    Token t = tokens_[pos_];
    std::string_view s = t.text;
    size_t eq = s.find('='), open = s.find('('), close = s.rfind(')');
    if (eq == std::string_view::npos || open == std::string_view::npos ||
        close != s.size() - 1 || open < eq || !isName(s.substr(0, eq)))
      fail(what);
    NetworkNode n;
    n.output = std::string(s.substr(0, eq));
    std::string_view opName = s.substr(eq + 1, open - eq - 1);
    auto op = parseOpKind(opName);
    if (!op)
      throw LineError{t.column + int(eq) + 1,
                      "expected an op (add, mul, relu, scale, copy), found " +
                          quoted(opName)};
    n.op = *op;
    std::string_view args = s.substr(open + 1, close - open - 1);
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (true) {
      size_t comma = args.find(',', start);
      parts.push_back(args.substr(start, comma == std::string_view::npos
                                             ? std::string_view::npos
                                             : comma - start));
      if (comma == std::string_view::npos)
        break;
      start = comma + 1;
    }
    size_t inputs = opArity(n.op);
    size_t expected = inputs + (n.op == OpKind::Scale ? 1 : 0);
    if (parts.size() != expected)
      throw LineError{t.column + int(open) + 1,
                      "expected " + std::to_string(expected) + " argument" +
                          (expected == 1 ? "" : "s") + " for " +
                          std::string(opName) + ", found " +
                          std::to_string(parts.size())};
    for (size_t i = 0; i < inputs; ++i) {
      if (!isName(parts[i]))
        throw LineError{t.column + int(open) + 1,
                        "expected a placeholder name, found " +
                            quoted(parts[i])};
      n.inputs.emplace_back(parts[i]);
    }
    if (n.op == OpKind::Scale) {
      auto f = parseDouble(parts.back());
      if (!f)
        throw LineError{t.column + int(open) + 1,
                        "expected a scale factor, found " +
                            quoted(parts.back())};
      n.factor = *f;
    }
    ++pos_;
    return n;
  }

  void expectEnd() {
    if (!atEnd())
      fail("end of line or '-> OUTCOME'");
  }

private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int endColumn_;
};

Outcome parseOutcome(LineParser &p) {
  Token t = p.next("ok, error CODE or violation KIND");
  if (t.text == "ok")
    return Outcome::ok();
  if (t.text == "error") {
    if (p.atEnd())
      p.fail("an error code (OutOfMemory, InvalidArgument, NotSupported, "
             "DeviceError, DeviceLost)");
    auto code = parseErrorCode(p.peek()->text);
    if (!code || *code == ErrorCode::Success)
      p.fail("an error code (OutOfMemory, InvalidArgument, NotSupported, "
             "DeviceError, DeviceLost)");
    p.next("");
    return Outcome::error(*code);
  }
  if (t.text == "violation") {
    if (p.atEnd())
      p.fail("a violation kind (host-access-while-device, ...)");
    auto v = parseViolationKind(p.peek()->text);
    if (!v)
      p.fail("a violation kind (host-access-while-device, "
             "host-access-while-lost, use-of-moved-from, view-out-of-bounds, "
             "invalid-tensor-type)");
    p.next("");
    return Outcome::violationOf(*v);
  }
  throw LineError{t.column,
                  "expected ok, error CODE or violation KIND, found " +
                      quoted(t.text)};
}

std::optional<CommandKind> parseCommandKind(std::string_view s) {
  for (int k = 0; k <= int(CommandKind::Free); ++k)
    if (commandKindName(CommandKind(k)) == s)
      return CommandKind(k);
  return std::nullopt;
}

DeviceSpec parseDevice(LineParser &p) {
  DeviceSpec d;
  d.name = p.name("a device name");
  while (!p.atEnd()) {
    Token t = p.next("");
    std::string_view s = t.text;
    if (s == "copy-to-host") {
      d.copyToHost = true;
      continue;
    }
    size_t eq = s.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == s.size())
      throw LineError{t.column, "expected budget=BYTES, backend=NAME, "
                                "copy-to-host or KEY=VALUE, found " +
                                    quoted(s)};
    std::string key(s.substr(0, eq)), value(s.substr(eq + 1));
    if (key == "backend") {
      d.backend = value;
    } else if (key == "budget") {
      auto v = parseUnsigned(value);
      if (!v)
        throw LineError{t.column + int(eq) + 1,
                        "expected a number of bytes, found " + quoted(value)};
      d.budget = *v;
    } else {
      d.parameters[key] = value;
    }
  }
  return d;
}

Command parseCommand(LineParser &p, CommandKind kind) {
  Command c;
  c.kind = kind;
  switch (kind) {
  case CommandKind::Create:
    c.target = p.name("a tensor name");
    c.elemKind = p.elemKind();
    c.dims = p.dims();
    if (auto v = p.fillPattern())
      c.pattern = *v;
    if (auto d = p.keyName("pinned"))
      c.device = *d;
    break;
  case CommandKind::View:
    c.target = p.name("a view name");
    c.source = p.name("the viewed tensor's name");
    c.dims = p.dims();
    if (auto v = p.keyNumber("at"))
      c.offset = *v;
    break;
  case CommandKind::Clone:
  case CommandKind::MoveConstruct:
  case CommandKind::MoveAssign:
    c.target = p.name("the target tensor's name");
    c.source = p.name("the source tensor's name");
    break;
  case CommandKind::SelfMove:
  case CommandKind::Destroy:
  case CommandKind::Read:
    c.target = p.name("a tensor name");
    break;
  case CommandKind::Write:
  case CommandKind::Refill:
    c.target = p.name("a tensor name");
    c.pattern = p.pattern();
    break;
  case CommandKind::ToDevice: {
    c.target = p.name("a tensor name");
    c.device = p.name("a device name");
    if (!p.atEnd() && p.peek()->text.substr(0, 3) == "at=") {
      Token t = p.next("");
      std::string_view loc = t.text.substr(3);
      if (!isName(loc))
        throw LineError{t.column + 3,
                        "expected a location name after at=, found " +
                            quoted(loc)};
      c.location = std::string(loc);
    }
    break;
  }
  case CommandKind::FromDevice: {
    c.target = p.name("a tensor name");
    c.device = p.name("a device name");
    if (p.atEnd())
      p.fail("release or keep");
    std::string_view mode = p.peek()->text;
    if (mode != "release" && mode != "keep")
      p.fail("release or keep");
    c.release = mode == "release";
    p.next("");
    break;
  }
  case CommandKind::Release:
  case CommandKind::DoubleRelease:
    c.target = p.name("a tensor name");
    c.device = p.name("a device name");
    break;
  case CommandKind::AddNetwork:
    c.target = p.name("a network name");
    c.device = p.name("a device name");
    c.elemKind = p.elemKind();
    c.dims = p.dims();
    c.nodes.push_back(p.node());
    while (!p.atEnd() && p.peek()->text != "->" &&
           !p.peek()->text.starts_with("declared="))
      c.nodes.push_back(p.node());
    if (!p.atEnd() && p.peek()->text.starts_with("declared=")) {
      Token t = p.next("");
      std::string_view list =
          t.text.substr(std::string_view("declared=").size());
      size_t start = 0;
      while (true) {
        size_t comma = list.find(',', start);
        std::string_view name = list.substr(
            start, comma == std::string_view::npos ? std::string_view::npos
                                                   : comma - start);
        if (!isName(name))
          throw LineError{t.column +
                              int(std::string_view("declared=").size() + start),
                          "expected a placeholder name, found " + quoted(name)};
        c.declared.emplace_back(name);
        if (comma == std::string_view::npos)
          break;
        start = comma + 1;
      }
    }
    break;
  case CommandKind::Run:
    c.target = p.name("a network name");
    while (!p.atEnd() && p.peek()->text != "->" && p.peek()->text != "&" &&
           p.peek()->text != "sync") {
      Token t = p.next("");
      size_t eq = t.text.find('=');
      if (eq == std::string_view::npos || !isName(t.text.substr(0, eq)) ||
          !isName(t.text.substr(eq + 1)))
        throw LineError{t.column,
                        "expected PLACEHOLDER=TENSOR, found " + quoted(t.text)};
      c.bindings.emplace_back(std::string(t.text.substr(0, eq)),
                              std::string(t.text.substr(eq + 1)));
    }
    break;
  case CommandKind::EvictNetwork:
  case CommandKind::EnsureOutputs:
    c.target = p.name("a network name");
    break;
  case CommandKind::Shutdown:
    c.device = p.name("a device name");
    break;
  case CommandKind::InjectFault: {
    c.device = p.name("a device name");
    if (p.atEnd())
      p.fail("a fault site (alloc, to-device, from-device, run)");
    auto site = parseFaultSite(p.peek()->text);
    if (!site)
      p.fail("a fault site (alloc, to-device, from-device, run)");
    p.next("");
    c.fault.site = *site;
    auto nth = p.keyNumber("nth", std::numeric_limits<unsigned>::max());
    if (!nth)
      p.fail("nth=N");
    c.fault.nth = unsigned(*nth);
    if (p.atEnd())
      p.fail("an error code");
    auto code = parseErrorCode(p.peek()->text);
    if (!code || *code == ErrorCode::Success)
      p.fail("an error code (OutOfMemory, InvalidArgument, NotSupported, "
             "DeviceError, DeviceLost)");
    p.next("");
    c.fault.code = *code;
    break;
  }
  case CommandKind::Alloc:
    c.target = p.name("a location name");
    c.device = p.name("a device name");
    c.bytes = p.number("a number of bytes");
    break;
  case CommandKind::Free:
    c.target = p.name("a location name");
    c.device = p.name("a device name");
    break;
  }
  if (!p.atEnd() && p.peek()->text == "sync") {
    if (!completesThroughCallback(kind))
      p.fail("end of line or '-> OUTCOME' ('sync', waiting in the "
             "framework's helper, follows to-device, from-device and run "
             "only)");
    p.next("");
    c.sync = true;
  }
  if (!p.atEnd() && p.peek()->text == "&") {
    if (!completesThroughCallback(kind) || c.sync)
      p.fail(c.sync ? "end of line or '-> OUTCOME' ('sync' waits: it takes "
                      "no '&')"
                    : "end of line or '-> OUTCOME' ('&', issuing without "
                      "waiting, follows to-device, from-device and run only)");
    p.next("");
    c.noWait = true;
  }
  if (!p.atEnd() && p.peek()->text == "in-callback") {
    if (!issuableInCallback(kind) || c.sync || c.noWait)
      p.fail("end of line or '-> OUTCOME' ('in-callback' follows to-device, "
             "from-device, release and shutdown written without 'sync' or "
             "'&')");
    p.next("");
    c.inCallback = true;
  }
  if (!p.atEnd() && p.peek()->text == "->") {
    p.next("");
    c.expect = parseOutcome(p);
  }
  p.expectEnd();
  return c;
}

std::string printDims(const std::vector<size_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "x" : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string printFactor(double f) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, end);
}

} // namespace

std::string printPattern(uint64_t pattern) {
  const ValueClass *c = valueClassOf(pattern);
  if (!c)
    return std::to_string(pattern);
  uint64_t variant = pattern - c->pattern;
  return std::string(c->name) +
         (variant ? ":" + std::to_string(variant) : std::string());
}

std::optional<uint64_t> parsePattern(std::string_view text) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    auto v = parseUnsigned(text);
    if (!v || valueClassOf(*v))
      return std::nullopt;
    return v;
  }
  size_t colon = text.find(':');
  std::string_view name = text.substr(0, colon);
  uint64_t variant = 0;
  if (colon != std::string_view::npos) {
    auto v = parseUnsigned(text.substr(colon + 1));
    if (!v || *v >= ValueClassBase)
      return std::nullopt;
    variant = *v;
  }
  for (const ValueClass &c : valueClasses())
    if (c.name == name)
      return c.pattern + variant;
  return std::nullopt;
}

ParseResult parseScenario(std::string_view text) {
  Scenario scenario;
  std::vector<int> commandLines;
  int lineNo = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(
        pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    std::vector<Token> tokens = tokenize(line);
    if (tokens.empty() || tokens.front().text.front() == '#')
      continue;
    LineParser p(tokens, int(line.size()) + 1);
    try {
      Token head = p.next("a command");
      // "|N COMMAND": a command of branch N of the parallel block.
      int branch = 0;
      if (head.text.front() == '|') {
        std::string_view number = head.text.substr(1);
        if (number.size() != 1 || number[0] < '1' ||
            number[0] > char('0' + MaxBranches))
          throw LineError{head.column, "expected a branch |1 to |" +
                                           std::to_string(MaxBranches) +
                                           ", found " + quoted(head.text)};
        branch = number[0] - '0';
        head = p.next("a command of branch " + std::to_string(branch));
      }
      if (head.text == "device") {
        if (branch)
          throw LineError{head.column, "expected a command of branch " +
                                           std::to_string(branch) +
                                           ", found 'device'"};
        if (!scenario.commands.empty())
          throw LineError{head.column,
                          "expected a command; devices are declared before "
                          "the first command"};
        scenario.devices.push_back(parseDevice(p));
        continue;
      }
      auto kind = parseCommandKind(head.text);
      if (!kind)
        throw LineError{head.column,
                        "expected a command (device, create, view, clone, "
                        "move-construct, move-assign, self-move, destroy, "
                        "to-device, from-device, release, double-release, "
                        "read, write, refill, add-network, run, "
                        "evict-network, ensure-outputs, shutdown, "
                        "inject-fault, alloc, free), found " +
                            quoted(head.text)};
      scenario.commands.push_back(parseCommand(p, *kind));
      scenario.commands.back().branch = branch;
      if (branch && !(scenario.commands.back().expect == Outcome::ok()))
        throw LineError{head.column,
                        "a command of a parallel branch has no written "
                        "outcome: it depends on the interleaving"};
      commandLines.push_back(lineNo);
    } catch (const LineError &e) {
      return ParseError{lineNo, e.column, e.message};
    }
  }
  std::string problem = validateScenario(scenario);
  if (!problem.empty()) {
    // The message starts with "step N (...)": point at that command's line.
    int line = lineNo;
    size_t step = std::strtoul(problem.c_str() + 5, nullptr, 10);
    if (problem.rfind("step ", 0) == 0 && step >= 1 &&
        step <= commandLines.size())
      line = commandLines[step - 1];
    return ParseError{line, 1, "expected a well-formed scenario: " + problem};
  }
  return scenario;
}

std::string printDevice(const DeviceSpec &d) {
  std::string s = "device " + d.name;
  if (!d.backend.empty())
    s += " backend=" + d.backend;
  if (d.budget)
    s += " budget=" + std::to_string(d.budget);
  if (d.copyToHost)
    s += " copy-to-host";
  for (const auto &[k, v] : d.parameters)
    s += " " + k + "=" + v;
  return s;
}

std::string printCommand(const Command &c) {
  std::string s(commandKindName(c.kind));
  auto add = [&](const std::string &part) { s += " " + part; };
  switch (c.kind) {
  case CommandKind::Create:
    add(c.target);
    add(std::string(elemKindName(c.elemKind)));
    add(printDims(c.dims));
    if (c.pattern)
      add("fill=" + printPattern(c.pattern));
    if (!c.device.empty())
      add("pinned=" + c.device);
    break;
  case CommandKind::View:
    add(c.target);
    add(c.source);
    add(printDims(c.dims));
    if (c.offset)
      add("at=" + std::to_string(c.offset));
    break;
  case CommandKind::Clone:
  case CommandKind::MoveConstruct:
  case CommandKind::MoveAssign:
    add(c.target);
    add(c.source);
    break;
  case CommandKind::SelfMove:
  case CommandKind::Destroy:
  case CommandKind::Read:
  case CommandKind::EvictNetwork:
  case CommandKind::EnsureOutputs:
    add(c.target);
    break;
  case CommandKind::Write:
  case CommandKind::Refill:
    add(c.target);
    add(printPattern(c.pattern));
    break;
  case CommandKind::ToDevice:
    add(c.target);
    add(c.device);
    if (!c.location.empty())
      add("at=" + c.location);
    break;
  case CommandKind::FromDevice:
    add(c.target);
    add(c.device);
    add(c.release ? "release" : "keep");
    break;
  case CommandKind::Release:
  case CommandKind::DoubleRelease:
  case CommandKind::Free:
    add(c.target);
    add(c.device);
    break;
  case CommandKind::AddNetwork:
    add(c.target);
    add(c.device);
    add(std::string(elemKindName(c.elemKind)));
    add(printDims(c.dims));
    for (const NetworkNode &n : c.nodes) {
      std::string args;
      for (const std::string &in : n.inputs)
        args += (args.empty() ? "" : ",") + in;
      if (n.op == OpKind::Scale)
        args += "," + printFactor(n.factor);
      add(n.output + "=" + std::string(opKindName(n.op)) + "(" + args + ")");
    }
    if (!c.declared.empty()) {
      std::string list;
      for (const std::string &name : c.declared)
        list += (list.empty() ? "" : ",") + name;
      add("declared=" + list);
    }
    break;
  case CommandKind::Run:
    add(c.target);
    for (const auto &[placeholder, tensor] : c.bindings)
      add(placeholder + "=" + tensor);
    break;
  case CommandKind::Shutdown:
    add(c.device);
    break;
  case CommandKind::InjectFault:
    add(c.device);
    add(std::string(faultSiteName(c.fault.site)));
    add("nth=" + std::to_string(c.fault.nth));
    add(std::string(errorCodeName(c.fault.code)));
    break;
  case CommandKind::Alloc:
    add(c.target);
    add(c.device);
    add(std::to_string(c.bytes));
    break;
  }
  if (c.sync)
    s += " sync";
  if (c.noWait)
    s += " &";
  if (c.inCallback)
    s += " in-callback";
  if (c.branch)
    return "|" + std::to_string(c.branch) + " " + s;
  if (c.expect.kind != Outcome::Kind::Ok)
    s += " -> " + c.expect.toString();
  return s;
}

std::string commentLines(const std::string &text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    out += "# " + text.substr(pos, nl - pos) + "\n";
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

std::string printScenario(const Scenario &scenario) {
  std::string out;
  for (const DeviceSpec &d : scenario.devices)
    out += printDevice(d) + "\n";
  for (const Command &c : scenario.commands)
    out += printCommand(c) + "\n";
  return out;
}

} // namespace drt::conformance
