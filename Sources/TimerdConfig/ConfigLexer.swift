/// Splits config bytes into logical lines: BOM dropped, CRLF tolerated, comments and blank lines skipped,
/// backslash continuations joined (each numbered by its first physical line), UTF-8 checked per line.
enum ConfigLexer {
    enum Content: Equatable {
        /// `[…]`: the text between the brackets, trimmed.
        case header(String)
        /// `key = value`, both trimmed.
        case pair(key: String, value: String)
    }

    struct Line: Equatable {
        var number: Int
        var content: Content
    }

    struct Output {
        var lines: [Line] = []
        var problems: [(line: Int, message: String)] = []
    }

    static func lex(_ input: [UInt8]) -> Output {
        var bytes = input[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        var physical = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            line.last == 0x0D ? line.dropLast() : line
        }
        if physical.last?.isEmpty == true { physical.removeLast() }  // the final newline ends a line, not starts one

        var output = Output()
        func decode(_ index: Int) -> String? {
            guard let text = String(validating: physical[index], as: UTF8.self) else {
                output.problems.append((index + 1, "invalid UTF-8 (config files must be UTF-8)"))
                return nil
            }
            guard !physical[index].contains(0) else {
                output.problems.append((index + 1, "line contains a NUL byte"))
                return nil
            }
            return text
        }

        var index = 0
        lines: while index < physical.count {
            let first = index
            index += 1
            guard var text = decode(first) else { continue }
            let start = trimmed(text)
            if start.isEmpty || start.hasPrefix("#") || start.hasPrefix(";") { continue }
            while text.hasSuffix("\\") {
                text.removeLast()
                text += " "
                guard index < physical.count else {
                    output.problems.append((first + 1, "the last line ends in a backslash, continuing past the end of the file"))
                    break
                }
                index += 1
                guard let next = decode(index - 1) else { continue lines }
                text += next
            }
            if let content = classify(text, line: first + 1, problems: &output.problems) {
                output.lines.append(Line(number: first + 1, content: content))
            }
        }
        return output
    }

    /// A classified line, or nil after recording why it is not one.
    private static func classify(_ text: String, line: Int, problems: inout [(line: Int, message: String)]) -> Content? {
        let body = trimmed(text)
        if body.hasPrefix("[") {
            guard body.hasSuffix("]"), body.count >= 2 else {
                problems.append((line, "unterminated section header (missing \"]\")"))
                return nil
            }
            return .header(trimmed(String(body.dropFirst().dropLast())))
        }
        guard let equals = body.firstIndex(of: "=") else {
            problems.append((line, "expected \"key = value\", a [section] header or a comment, got \(quote(body))"))
            return nil
        }
        let key = trimmed(String(body[..<equals]))
        guard !key.isEmpty else {
            problems.append((line, "missing key before \"=\""))
            return nil
        }
        return .pair(key: key, value: trimmed(String(body[body.index(after: equals)...])))
    }

    /// `text` without leading and trailing spaces and tabs.
    static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
            let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return "" }
        return String(scalars[first...last])
    }

    /// `text` in double quotes, shortened for messages.
    static func quote(_ text: String) -> String {
        let limit = 60
        return text.count > limit ? "\"\(text.prefix(limit))…\"" : "\"\(text)\""
    }
}
