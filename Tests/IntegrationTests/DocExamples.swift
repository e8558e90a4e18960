import Foundation

/// The examples of the docs, as `DocExamplesTests` runs them: each `console` block of `README.md` and
/// `docs/*.md`, and each `.EX` block of the man pages' EXAMPLES sections (the README, "The docs' examples
/// are tests", says how to write one).
///
/// A block is a list of steps: a `$ ` line is a command (continued by lines after one that ends in `\`),
/// and the lines up to the next `$ ` are its output. `socat - UNIX-CONNECT:…` starts a protocol
/// session: the lines after it alternate between requests and their `OK`/`ERR` replies. An HTML comment
/// right before the block sets it up for the test, unseen by readers:
///
///     <!-- example
///     config:                  the daemon's config (a new daemon; shown as /etc/timerd/timerd.conf)
///     [job "hello"] …
///     setup:                   commands run first; each must succeed, its output is not compared
///     $ timerctl add hello --every 5s --command 'echo hello; exit 3'
///     await hello runs=1 running=0   (waits until SHOW hello says so, as JSON writes it: a harness command)
///     during:                  run once a `timerctl watch` of the block is going (the first `during:`
///                              for its first watch, the next for the next)
///     $ timerctl pause hello
///     fresh                    a new daemon, empty config
///     no daemon                timerd is not running (it was, on the socket the commands use)
///     varies: REGEX            what matches is not compared (counts that depend on what ran, …)
///     not checked: REASON      not run (cluster output, a user that does not exist here, …)
///     -->
struct DocExample: CustomStringConvertible {
    struct Step {
        var command: String
        /// What the doc shows after the command; nil for a man page's command shown without output
        /// (it must succeed).
        var expected: [String]?
        var line: Int
    }

    var file: String
    var line: Int
    var steps: [Step] = []
    var config: String?
    var fresh = false
    var noDaemon = false
    var setup: [String] = []
    var during: [[String]] = []
    var notChecked: String?
    /// What is not compared in this block's output.
    var varies: [NSRegularExpression] = []

    var description: String { "\(file):\(line)" }

    // MARK: - Markdown

    static func markdown(_ text: String, file: String) throws -> [DocExample] {
        let lines = text.components(separatedBy: "\n")
        var examples: [DocExample] = []
        var directive: [String]?
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("<!-- example") {
                var body = [String(trimmed.dropFirst("<!-- example".count))]
                while !(body.last ?? "").contains("-->"), index + 1 < lines.count {
                    index += 1
                    body.append(lines[index].trimmingCharacters(in: .whitespaces))
                }
                body[body.count - 1] = body[body.count - 1].replacingOccurrences(of: "-->", with: "")
                directive = body
            } else if trimmed == "```console" {
                let indent = line.prefix { $0 == " " }.count
                var block: [String] = []
                let start = index + 1
                index += 1
                while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                    block.append(String(lines[index].dropFirst(min(indent, lines[index].prefix { $0 == " " }.count))))
                    index += 1
                }
                var example = DocExample(file: file, line: start)
                try example.apply(directive ?? [])
                example.steps = try steps(block, firstLine: start + 1, where: example)
                examples.append(example)
                directive = nil
            } else if !trimmed.isEmpty {
                directive = nil
            }
            index += 1
        }
        return examples
    }

    static func steps(_ block: [String], firstLine: Int, where example: DocExample) throws -> [Step] {
        var steps: [Step] = []
        var index = 0
        while index < block.count {
            let line = block[index]
            if line.hasPrefix("$ ") {
                var command = String(line.dropFirst(2))
                let at = firstLine + index
                while command.hasSuffix("\\"), index + 1 < block.count {
                    index += 1
                    command += "\n" + block[index]
                }
                steps.append(Step(command: command, expected: [], line: at))
            } else {
                guard !steps.isEmpty else { throw HarnessError("\(example): output before any command: \(line)") }
                steps[steps.count - 1].expected!.append(line)
            }
            index += 1
        }
        return steps
    }

    /// Reads the lines of an `<!-- example … -->` comment (the first is what followed `example`).
    mutating func apply(_ directive: [String]) throws {
        var section: String?
        var config: [String] = []
        for (position, raw) in directive.enumerated() {
            var line = raw.trimmingCharacters(in: .whitespaces)
            if position == 0, line.hasPrefix(":") { line = String(line.dropFirst()).trimmingCharacters(in: .whitespaces) }
            if ["config:", "setup:", "during:"].contains(line) {
                section = line
                if line == "during:" { during.append([]) }
                continue
            }
            if section != "config:" {
                if line.isEmpty { continue }
                if line == "fresh" {
                    fresh = true
                    continue
                }
                if line == "no daemon" {
                    noDaemon = true
                    continue
                }
                if line.hasPrefix("varies:") {
                    let pattern = line.dropFirst("varies:".count).trimmingCharacters(in: .whitespaces)
                    do {
                        varies.append(try NSRegularExpression(pattern: pattern))
                    } catch {
                        throw HarnessError("\(self): varies: not a regular expression: \(pattern)")
                    }
                    continue
                }
                if line.hasPrefix("not checked:") {
                    let reason = line.dropFirst("not checked:".count).trimmingCharacters(in: .whitespaces)
                    guard !reason.isEmpty else { throw HarnessError("\(self): 'not checked:' needs a reason") }
                    notChecked = reason
                    continue
                }
            }
            let command = line.hasPrefix("$ ") ? String(line.dropFirst(2)) : line
            switch section {
            case "config:": config.append(raw)
            case "setup:": setup.append(command)
            case "during:": during[during.count - 1].append(command)
            default: throw HarnessError("\(self): unknown example directive: \(line)")
            }
        }
        if !config.isEmpty {
            while config.last?.isEmpty == true { config.removeLast() }
            self.config = config.joined(separator: "\n") + "\n"
            fresh = true
        }
    }

    // MARK: - Man pages

    /// The `.EX` blocks of a man page's EXAMPLES section. A block with `$ ` lines is read as a console
    /// block; in one without, each command is a step whose output is not shown, and only `timerctl`
    /// commands are run. Comment lines `.\" example: …` before a block set it up, one directive each.
    static func manPage(_ text: String, file: String) throws -> [DocExample] {
        let lines = text.components(separatedBy: "\n")
        var examples: [DocExample] = []
        var inExamples = false
        var directive: [String] = []
        var index = 0
        while index < lines.count {
            let line = lines[index]
            if line.hasPrefix(".SH") {
                inExamples = line.hasPrefix(".SH EXAMPLE")
            } else if inExamples, line.hasPrefix(#".\" example"#) {
                directive.append(String(line.dropFirst(#".\" example"#.count)))
            } else if inExamples, line == ".EX" {
                let start = index + 1
                var block: [String] = []
                index += 1
                while index < lines.count, lines[index] != ".EE" {
                    block.append(unescape(lines[index]))
                    index += 1
                }
                var example = DocExample(file: file, line: start)
                for line in directive { try example.apply([line]) }
                directive = []
                if block.contains(where: { $0.hasPrefix("$ ") }) {
                    example.steps = try steps(block, firstLine: start + 1, where: example)
                } else if block.first?.hasPrefix("[") == true {
                    // A config file: timerd must take it as it is.
                    let file = "example-\(start).conf"
                    let command = "cat >\(file) <<'EXAMPLE'\n" + block.joined(separator: "\n") + "\nEXAMPLE\ntimerd --check-config --config \(file)"
                    example.steps = [Step(command: command, expected: nil, line: start + 1)]
                } else {
                    var command = ""
                    for (offset, line) in block.enumerated() {
                        command += (command.isEmpty ? "" : "\n") + line
                        guard !line.hasSuffix("\\") else { continue }
                        example.steps.append(Step(command: command, expected: nil, line: start + 1 + offset))
                        command = ""
                    }
                    if example.notChecked == nil, let other = example.steps.first(where: { !$0.command.hasPrefix("timerctl ") }) {
                        example.notChecked = Self.notTimerctl + ": \(other.command.prefix { $0 != " " })"
                    }
                }
                examples.append(example)
            }
            index += 1
        }
        return examples
    }

    /// Why a man page's block of commands is not run: it is not `timerctl` (`systemctl`, `journalctl`, a
    /// second `timerd` on a socket of its own, …). Not counted among the examples not checked.
    static let notTimerctl = "not a timerctl command"

    static func unescape(_ line: String) -> String {
        var text = line
        for (escape, plain) in [("\\-", "-"), ("\\(aq", "'"), ("\\(dq", "\""), ("\\(em", "—"), ("\\(ti", "~"), ("\\&", ""), ("\\e", "\\")] {
            text = text.replacingOccurrences(of: escape, with: plain)
        }
        // What the page leaves out.
        return text == "..." ? "…" : text
    }
}

/// How output is compared: the doc's and the actual, each normalised, line by line. A line `…` stands for
/// any number of lines, and `…` in a line for any text.
enum DocOutput {
    /// Output of commands that depend only on their arguments is compared as it is; the rest has its
    /// times, durations, sizes and pids replaced by placeholders first.
    static func isExact(_ command: String) -> Bool {
        // `next` without `--from` counts from now.
        ["timerctl simulate", "timerctl import", "cat "].contains { command.hasPrefix($0) } || command.contains("--help")
            || (command.hasPrefix("timerctl next") && command.contains("--from"))
    }

    private static let volatile: [(NSRegularExpression, String)] = [
        (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"#, "<time>"),
        (#"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"#, "<time>"),
        (#"\b\d\d:\d\d:\d\d(\.\d+)?\b"#, "<time>"),
        (#""([a-z_]*_(ms|bytes|seconds)|pid|requests|samples|max|p50|p90|p99)":-?\d+(\.\d+)?"#, "\"$1\":<n>"),
        (#"<?\b\d+(\.\d+)?(ns|us|µs|ms|s|min|m|h|d)(\d+(\.\d+)?(ms|s|m|h))*\b"#, "<d>"),
        (#"\b\d+(\.\d+)? (B|KiB|MiB|GiB)\b"#, "<size>"),
        (#"\bpid[: ]\d+"#, "pid <n>"),
        // A time less than a second ago.
        (#"(\(|, | {2,})now(\)| {2,}|$)"#, "$1<d> ago$2"),
    ].map { (try! NSRegularExpression(pattern: $0.0), $0.1) }
    private static let spaces = try! NSRegularExpression(pattern: " {2,}")

    static func normalise(_ line: String, exact: Bool, varies: [NSRegularExpression] = []) -> String {
        var text = line
        if !exact {
            for (pattern, template) in volatile {
                text = pattern.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: template)
            }
        }
        for pattern in varies {
            text = pattern.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "<varies>")
        }
        // Columns are as wide as their widest value.
        text = spaces.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: " ")
        while text.hasSuffix(" ") { text.removeLast() }
        return text
    }

    /// Whether `actual` is what `expected` shows (both normalised).
    static func matches(_ expected: [String], _ actual: [String]) -> Bool {
        guard let first = expected.first else { return actual.isEmpty }
        if first == "…" {
            return (0...actual.count).contains { matches(Array(expected.dropFirst()), Array(actual.dropFirst($0))) }
        }
        guard let line = actual.first, lineMatches(first, line) else { return false }
        return matches(Array(expected.dropFirst()), Array(actual.dropFirst()))
    }

    static func lineMatches(_ expected: String, _ actual: String) -> Bool {
        guard expected.contains("…") else { return expected == actual }
        let pattern = "^" + expected.components(separatedBy: "…").map(NSRegularExpression.escapedPattern(for:)).joined(separator: ".*") + "$"
        return (try? NSRegularExpression(pattern: pattern))?.firstMatch(in: actual, range: NSRange(actual.startIndex..., in: actual)) != nil
    }
}
