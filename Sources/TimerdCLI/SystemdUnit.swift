import TimerdConfig

/// A systemd unit file (systemd.syntax(7)) as `timerctl import systemd` reads it: its settings in file
/// order, each with the file and line it came from, drop-ins after the unit itself as systemd applies them.
struct SystemdUnit {
    /// One `Key=Value` line.
    struct Setting {
        var section: String
        var key: String
        var value: String
        /// `FILE:LINE`, for comments and diagnostics.
        var origin: String
        /// The line as written (continuation lines joined), for a left-out comment.
        var raw: String
    }

    /// The unit's name (`logrotate.timer`).
    var name: String
    /// Where the unit file is.
    var path: String
    var settings: [Setting] = []

    /// The values of `key` in `section`, as systemd's list settings read them: an empty value clears those
    /// before it.
    func values(_ section: String, _ key: String) -> [Setting] {
        var found: [Setting] = []
        for setting in settings where setting.section == section && setting.key == key {
            if setting.value.isEmpty { found.removeAll() } else { found.append(setting) }
        }
        return found
    }

    /// The last value of a single-valued setting (systemd: the last assignment wins).
    func last(_ section: String, _ key: String) -> Setting? {
        settings.last { $0.section == section && $0.key == key }
    }

    /// The unit name without its type suffix (`logrotate` for `logrotate.timer`).
    var stem: String {
        guard let dot = name.lastIndex(of: ".") else { return name }
        return String(name[..<dot])
    }

    /// Parses the text of a unit file (or a drop-in) and appends its settings. `#` and `;` start comments,
    /// a trailing `\` continues a line (comment lines inside are skipped, as systemd does).
    mutating func parse(_ text: String, path: String) {
        var section = ""
        var pending: (line: Int, text: String)?
        for (offset, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = String(rawLine)
            if line.hasSuffix("\r") { line.removeLast() }
            let trimmed = line.trimmingBlanks()
            if pending != nil, trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }
            if var continued = pending {
                if trimmed.hasSuffix("\\") {
                    continued.text += " " + trimmed.dropLast()
                    pending = continued
                    continue
                }
                continued.text += " " + trimmed
                pending = nil
                add(continued.text, section: section, path: path, line: continued.line)
                continue
            }
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }
            if trimmed.hasPrefix("["), trimmed.hasSuffix("]") {
                section = String(trimmed.dropFirst().dropLast())
                continue
            }
            if trimmed.hasSuffix("\\") {
                pending = (offset + 1, String(trimmed.dropLast()))
                continue
            }
            add(trimmed, section: section, path: path, line: offset + 1)
        }
        if let pending { add(pending.text, section: section, path: path, line: pending.line) }
    }

    private mutating func add(_ line: String, section: String, path: String, line number: Int) {
        guard let equals = line.firstIndex(of: "=") else {
            settings.append(Setting(section: section, key: line, value: "", origin: "\(path):\(number)", raw: line))
            return
        }
        let key = String(line[..<equals]).trimmingBlanks()
        let value = String(line[line.index(after: equals)...]).trimmingBlanks()
        settings.append(Setting(section: section, key: key, value: value, origin: "\(path):\(number)", raw: line))
    }

    /// Reads `path` (the unit `name`, or its template) and the drop-ins `FILE.d/*.conf` (sorted by name,
    /// as systemd orders them; an instance's own `NAME.d` after its template's), or why the unit file
    /// cannot be read.
    static func load(_ path: String, name: String, fileSystem: any ConfigFileSystem) -> Swift.Result<SystemdUnit, UnitError> {
        var unit = SystemdUnit(name: name, path: path)
        do {
            let bytes = try fileSystem.read(path)
            guard let text = String(validating: bytes, as: UTF8.self), !bytes.contains(0) else {
                return .failure(UnitError(message: "\(path): not a text file (not UTF-8, or a NUL byte)"))
            }
            unit.parse(text, path: path)
        } catch {
            return .failure(UnitError(message: "\(path): cannot read: \(error.reason)"))
        }
        var dropIns = fileSystem.glob(escapeGlob(path) + ".d/*.conf").sorted { basename($0) < basename($1) }
        if basename(path) != name {
            let directory = path.contains("/") ? String(path[...path.lastIndex(of: "/")!]) : ""
            dropIns += fileSystem.glob(escapeGlob(directory + name) + ".d/*.conf").sorted { basename($0) < basename($1) }
        }
        for dropIn in dropIns {
            guard let bytes = try? fileSystem.read(dropIn), let text = String(validating: bytes, as: UTF8.self) else {
                return .failure(UnitError(message: "\(dropIn): cannot read this drop-in"))
            }
            unit.parse(text, path: dropIn)
        }
        return .success(unit)
    }

    static func basename(_ path: String) -> String {
        String(path.split(separator: "/").last ?? Substring(path))
    }

    private static func escapeGlob(_ path: String) -> String {
        var escaped = ""
        for character in path {
            if "*?[\\".contains(character) { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }

    struct UnitError: Error {
        var message: String
    }
}

extension String {
    /// Without blanks (spaces, tabs) at either end.
    func trimmingBlanks() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
