/// systemd's reading of command lines and `Environment=` values (systemd.service(5) "COMMAND LINES",
/// systemd.unit(5) "SPECIFIERS"): words, quotes, C escapes, `%` specifiers, `$` references.
enum SystemdWords {
    /// Why a value cannot be read exactly.
    struct Unsupported: Error {
        var message: String
    }

    /// A part of a word after `$` expansion is decided: text, or `${NAME}` (one word, the value as it is).
    enum Part: Equatable {
        case text(String)
        case variable(String)
    }

    /// Splits `text` into words as systemd's `extract_first_word(…, EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE)`:
    /// blanks separate, `'…'` and `"…"` quote, backslash escapes are C's (and `\;` is a `;`, as in
    /// `find … -exec rm {} \;`). A bare `;` word, which separates commands, is not supported.
    static func split(_ text: String) throws(Unsupported) -> [String] {
        var words: [String] = []
        var current: String?
        // Whether the current word has only unquoted, unescaped characters so far.
        var bare = true
        func finish() throws(Unsupported) {
            if let word = current {
                if word == ";" && bare { throw Unsupported(message: "several commands on one line (;) are not supported") }
                words.append(word)
            }
            current = nil
            bare = true
        }
        var quote: Character?
        var iterator = Array(text)
        var index = 0
        func next() -> Character? {
            guard index < iterator.count else { return nil }
            defer { index += 1 }
            return iterator[index]
        }
        while let character = next() {
            if character == "\\" {
                guard let escaped = next() else { throw Unsupported(message: "a trailing backslash") }
                let value: String
                switch escaped {
                case "a": value = "\u{07}"
                case "b": value = "\u{08}"
                case "f": value = "\u{0C}"
                case "n": value = "\n"
                case "r": value = "\r"
                case "t": value = "\t"
                case "v": value = "\u{0B}"
                case "s": value = " "
                case "\\", "\"", "'", ";": value = String(escaped)
                default: throw Unsupported(message: "the escape \\\(escaped) is not supported")
                }
                current = (current ?? "") + value
                bare = false
                continue
            }
            if let open = quote {
                if character == open { quote = nil } else { current = (current ?? "") + String(character) }
                continue
            }
            if character == "'" || character == "\"" {
                quote = character
                current = current ?? ""
                bare = false
            } else if character == " " || character == "\t" || character == "\n" || character == "\r" {
                try finish()
            } else {
                current = (current ?? "") + String(character)
            }
        }
        if quote != nil { throw Unsupported(message: "an unterminated quote") }
        try finish()
        iterator.removeAll()
        return words
    }

    /// What `%` specifiers stand for in one unit (systemd.unit(5) "SPECIFIERS"), for a system unit.
    struct Specifiers {
        /// The unit's full name (`logrotate.service`).
        var unitName: String
        /// `User=`, or nil for root.
        var user: String?
        /// The user's home directory, if known.
        var home: String?

        /// `text` with its specifiers resolved; throws for one that is not supported.
        func resolve(_ text: String) throws(Unsupported) -> String {
            var result = ""
            var percent = false
            for character in text {
                if !percent {
                    if character == "%" { percent = true } else { result.append(character) }
                    continue
                }
                percent = false
                result += try value(of: character)
            }
            if percent { throw Unsupported(message: "a lone % at the end") }
            return result
        }

        private func value(of specifier: Character) throws(Unsupported) -> String {
            let stem = unitName.lastIndex(of: ".").map { String(unitName[..<$0]) } ?? unitName
            let at = stem.firstIndex(of: "@")
            let prefix = at.map { String(stem[..<$0]) } ?? stem
            let instance = at.map { String(stem[stem.index(after: $0)...]) } ?? ""
            switch specifier {
            case "%": return "%"
            case "n": return unitName
            case "N": return stem
            case "p": return prefix
            case "i": return instance
            case "I" where !instance.contains("\\") && !instance.contains("-"): return instance
            case "j": return String(prefix.split(separator: "-", omittingEmptySubsequences: false).last ?? "")
            case "u": return user ?? "root"
            case "h":
                if let home { return home }
                throw Unsupported(message: "%h: the home directory of \(user ?? "root") is not known here")
            case "t": return "/run"
            case "S": return "/var/lib"
            case "C": return "/var/cache"
            case "L": return "/var/log"
            case "E": return "/etc"
            case "T": return "/tmp"
            case "V": return "/var/tmp"
            default:
                throw Unsupported(message: "the specifier %\(specifier) is not supported (it depends on the machine or the running system)")
            }
        }
    }

    /// A command word's `$` references, as systemd expands them when it runs the command: `$$` is `$`,
    /// `${NAME}` the variable's value as part of the word. A whole word `$NAME` (which systemd splits into
    /// words at blanks) is not supported: /bin/sh would split it differently (and expand globs).
    static func parts(_ word: String) throws(Unsupported) -> [Part] {
        var parts: [Part] = []
        var text = ""
        let characters = Array(word)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            guard character == "$", index + 1 < characters.count else {
                text.append(character)
                index += 1
                continue
            }
            let next = characters[index + 1]
            if next == "$" {
                text.append("$")
                index += 2
            } else if next == "{", let close = characters[(index + 2)...].firstIndex(of: "}"),
                isName(characters[(index + 2)..<close])
            {
                if !text.isEmpty { parts.append(.text(text)) }
                text = ""
                parts.append(.variable(String(characters[(index + 2)..<close])))
                index = close + 1
            } else if isName(characters[(index + 1)...]), index == 0 {
                throw Unsupported(message: "\(word) is split into words by systemd, which /bin/sh does differently; write ${NAME}")
            } else {
                text.append(character)
                index += 1
            }
        }
        if !text.isEmpty || parts.isEmpty { parts.append(.text(text)) }
        return parts
    }

    private static func isName(_ characters: ArraySlice<Character>) -> Bool {
        guard let first = characters.first, !first.isNumber else { return false }
        return characters.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
    }

    /// `parts` as one /bin/sh word.
    static func shellWord(_ parts: [Part]) -> String {
        parts.map { part in
            switch part {
            case .text(let text): text.isEmpty ? "''" : ShellQuote.word(text)
            case .variable(let name): "\"${\(name)}\""
            }
        }.joined()
    }
}
