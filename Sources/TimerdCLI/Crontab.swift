import TimerdCore

/// A crontab(5) file read line by line as Vixie cron and cronie read it: pure, no I/O.
///
/// A line is blank, a comment (first non-blank character `#`), an environment setting (`NAME = value`,
/// either side optionally in matching quotes, which keep blanks), or a job: five time fields or an
/// `@macro`, then (in the system format of `/etc/crontab` and `/etc/cron.d`) a user name, then the
/// command, whose first unescaped `%` starts its standard input (see ``splitPercent(_:)``).
enum Crontab {
    enum Line: Equatable {
        case blank
        /// The comment without its leading blanks, `#` included.
        case comment(String)
        case variable(name: String, value: String)
        case job(Entry)
        /// A line cron would refuse, and why.
        case bad(String)
    }

    struct Entry: Equatable {
        /// The five fields joined by one space, or the macro (`@daily`, `@reboot`).
        var schedule: String
        /// The user field of the system format.
        var user: String?
        /// The command as the shell gets it (`\%` already turned into `%`).
        var command: String
        /// The standard input cron writes to it (after the first unescaped `%`), nil without one.
        var stdin: String?
    }

    static let macros = ["@reboot", "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"]

    /// Reads one line (without its line break).
    static func parse(_ line: Substring, system: Bool) -> Line {
        let text = line.drop(while: isBlank)
        if text.isEmpty { return .blank }
        if text.first == "#" { return .comment(String(text)) }
        if let (name, value) = variable(text) { return .variable(name: name, value: value) }
        var rest = text
        func word() -> Substring {
            rest = rest.drop(while: isBlank)
            let word = rest.prefix(while: { !isBlank($0) })
            rest = rest.dropFirst(word.count)
            return word
        }
        let schedule: String
        let first = word()
        if first.hasPrefix("@") {
            guard macros.contains(first.lowercased()) else { return .bad("unknown macro \"\(first)\"") }
            schedule = first.lowercased()
        } else {
            let fields = [first] + (1..<5).map { _ in word() }
            guard !fields.contains(where: \.isEmpty) else { return .bad("expected five time fields and a command") }
            schedule = fields.joined(separator: " ")
            do {
                _ = try CronExpression.parse(schedule)
            } catch {
                return .bad(error.message)
            }
        }
        var user: String?
        if system {
            let name = word()
            guard !name.isEmpty else { return .bad("expected a user name and a command after the schedule") }
            user = String(name)
        }
        let command = rest.drop(while: isBlank)
        guard !command.isEmpty else { return .bad("no command") }
        let (shellCommand, stdin) = splitPercent(command)
        guard !shellCommand.isEmpty else { return .bad("no command before the %") }
        return .job(Entry(schedule: schedule, user: user, command: shellCommand, stdin: stdin))
    }

    /// cron's `%` rule: `\%` is a `%`, the first other `%` ends the command; in the rest, which is the
    /// standard input, each `%` is a newline and `\%` a `%` (other backslashes are kept).
    static func splitPercent(_ command: Substring) -> (command: String, stdin: String?) {
        var shell = ""
        var escaped = false
        var index = command.startIndex
        while index < command.endIndex {
            let character = command[index]
            index = command.index(after: index)
            if escaped {
                if character == "%" { shell.removeLast() }
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "%" {
                return (shell, translateInput(command[index...]))
            }
            shell.append(character)
        }
        return (shell, nil)
    }

    /// The standard input part: `%` → newline, `\%` → `%`, `\x` kept (Vixie cron's `do_command`).
    private static func translateInput(_ text: Substring) -> String {
        var input = ""
        var escaped = false
        for character in text {
            if escaped {
                if character != "%" { input.append("\\") }
                escaped = false
                if character == "\\" {
                    escaped = true
                    continue
                }
                input.append(character)
            } else if character == "\\" {
                escaped = true
            } else {
                input.append(character == "%" ? "\n" : character)
            }
        }
        if escaped { input.append("\\") }
        return input
    }

    /// `NAME=value` with cron's quoting (`load_env`): nil when the line is not an environment setting.
    static func variable(_ text: Substring) -> (String, String)? {
        var rest = text
        guard let name = name(&rest), !name.isEmpty else { return nil }
        rest = rest.drop(while: isBlank)
        guard rest.first == "=" else { return nil }
        rest = rest.dropFirst().drop(while: isBlank)
        if let quote = rest.first, quote == "'" || quote == "\"" {
            let body = rest.dropFirst()
            guard let end = body.firstIndex(of: quote), body[body.index(after: end)...].allSatisfy(isBlank) else { return nil }
            return (name, String(body[..<end]))
        }
        var value = rest
        while let last = value.last, isBlank(last) { value = value.dropLast() }
        return (name, String(value))
    }

    /// The name: in matching quotes (no `=` inside), or up to a blank or `=`.
    private static func name(_ rest: inout Substring) -> String? {
        if let quote = rest.first, quote == "'" || quote == "\"" {
            let body = rest.dropFirst()
            guard let end = body.firstIndex(of: quote), !body[..<end].contains("=") else { return nil }
            rest = body[body.index(after: end)...]
            return String(body[..<end])
        }
        let name = rest.prefix(while: { !isBlank($0) && $0 != "=" })
        rest = rest.dropFirst(name.count)
        return String(name)
    }

    static func isBlank(_ character: Character) -> Bool { character == " " || character == "\t" }
}
