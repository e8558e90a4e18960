/// User and group names as `user=`/`group=` and `allow_users=`/`allow_groups=` take them.
public enum AccountName {
    /// Checks the shape of a user or group name: 1 to 32 of letters, digits, `_`, `.`, `-` (not first),
    /// optionally ending in `$` (Samba machine accounts), and not all digits (a number is not looked up as an
    /// id: `user=0` is refused rather than silently meaning root). Whether it exists is checked where the
    /// account database is (the daemon, `timerd --check-config`).
    public static func validate(_ text: String, key: String) throws(TimerdError) -> String {
        var bytes = Array(text.utf8)
        if bytes.last == UInt8(ascii: "$") { bytes.removeLast() }
        let allowed = { (byte: UInt8) in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
        guard !bytes.isEmpty, text.utf8.count <= 32, bytes.allSatisfy(allowed), bytes[0] != UInt8(ascii: "-") else {
            throw TimerdError(.badArgument, "\(key): invalid name \"\(text)\": 1 to 32 letters, digits, '_', '.' or '-'", key: key)
        }
        guard !bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw TimerdError(.badArgument, "\(key): give a name, not a number (\"\(text)\")", key: key)
        }
        return text
    }

    /// Reads a comma-separated list of names (`allow_users=alice, bob`).
    public static func parseList(_ text: String, key: String) throws(TimerdError) -> [String] {
        var names: [String] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let name = try validate(String(part).trimmingCharacters(in: " \t"), key: key)
            if !names.contains(name) { names.append(name) }
        }
        return names
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var scalars = Substring(self).unicodeScalars
        while let first = scalars.first, set.unicodeScalars.contains(first) { scalars.removeFirst() }
        while let last = scalars.last, set.unicodeScalars.contains(last) { scalars.removeLast() }
        return String(scalars)
    }
}
