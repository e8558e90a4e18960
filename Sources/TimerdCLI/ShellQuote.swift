/// Quoting for POSIX sh: what `/bin/sh -c` reads back as exactly the text given.
enum ShellQuote {
    /// `text` as one shell word: as it is when it has only safe characters, else in single quotes, each
    /// `'` written `'\''`.
    static func word(_ text: String) -> String {
        let safe = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "/._-+:,=@%".unicodeScalars.contains(scalar))
        }
        if safe { return text }
        return "'" + text.replacingAll("'", with: "'\\''") + "'"
    }

    /// A `printf` format that prints exactly `text`: `\` and `%` doubled, each newline `\n` (so the format has
    /// no line break and fits on one config line).
    static func printfFormat(_ text: String) -> String {
        var format = ""
        for character in text {
            switch character {
            case "\\": format += "\\\\"
            case "%": format += "%%"
            case "\n": format += "\\n"
            default: format.append(character)
            }
        }
        return format
    }
}

extension String {
    /// Every `target` replaced by `replacement` (no Foundation).
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self {
            if character == target { result += replacement } else { result.append(character) }
        }
        return result
    }
}
