/// Job names for imported jobs, derived from their commands: unique within one import (`-2`, `-3`, … for
/// the second, third, … of a name) and stable (the same file gives the same names, in file order).
struct JobNames {
    private var used: Set<String> = []

    /// `base`, or `base-2`, `base-3`, … when taken; the name is then taken.
    mutating func next(_ base: String) -> String {
        var name = base
        var suffix = 2
        while used.contains(name) {
            name = "\(base)-\(suffix)"
            suffix += 1
        }
        used.insert(name)
        return name
    }

    /// Gives a name back (its job was left out).
    mutating func release(_ name: String) {
        used.remove(name)
    }

    /// Words that do not name what a command does: shell keywords and prefixes (dropped), and commands
    /// that only test or move (`test -x … && real-work`).
    private static let keywords: Set<String> = ["if", "then", "else", "elif", "do", "while", "until", "!", "exec", "time", "nohup", "command"]
    private static let helpers: Set<String> = ["cd", "test", "[", "[[", "true", "false", ":", "exit", "sleep", "fi", "done"]

    /// The name for a shell command: the basename of the first program in it that is not a keyword, an
    /// assignment or a helper (`cd`, `test`, `[`), lowercased, with characters a job name cannot have as
    /// `-`; for `run-parts`, the directory it runs (`cron.daily`). `job` when nothing is left.
    static func base(forCommand command: String) -> String {
        let segments = command.split(whereSeparator: { ";&|(){}\n".contains($0) })
        var fallback: Substring?
        for segment in segments {
            var words = segment.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
            while let first = words.first, keywords.contains(String(first)) || isAssignment(first) { words = words.dropFirst() }
            guard let program = words.first else { continue }
            if fallback == nil { fallback = program }
            if helpers.contains(String(program)) { continue }
            if basename(program) == "run-parts", let directory = words.dropFirst().last(where: { !$0.hasPrefix("-") }) {
                return sanitize(basename(directory))
            }
            return sanitize(basename(program))
        }
        return sanitize(fallback.map(basename) ?? "")
    }

    /// `NAME=value` before a command.
    private static func isAssignment(_ word: Substring) -> Bool {
        guard let equals = word.firstIndex(of: "="), equals != word.startIndex else { return false }
        return word[..<equals].allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
    }

    private static func basename(_ word: Substring) -> Substring {
        word.split(separator: "/").last ?? word
    }

    /// Lowercased; other characters than `a-z 0-9 _ . -` become `-`, runs of `-` one, none at either end;
    /// at most 60 characters (room for a suffix); `job` for nothing, `.` or `..`.
    static func sanitize(_ text: Substring) -> String {
        var name = ""
        for scalar in text.lowercased().unicodeScalars {
            let ok = ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "_" || scalar == "."
            if ok {
                name.unicodeScalars.append(scalar)
            } else if !name.hasSuffix("-") {
                name += "-"
            }
        }
        while name.hasPrefix("-") { name.removeFirst() }
        name = String(name.prefix(60))
        while name.hasSuffix("-") { name.removeLast() }
        return name.isEmpty || name == "." || name == ".." ? "job" : name
    }
}
