import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** What EsperBench and FlinkBench both do (compiled with each): the matches out, the JVM's peak memory. */
final class Shared {
    private Shared() {
    }

    /** One match a line, as scripts/cep_rivals.py reads them. */
    static void writeLines(Path out, List<String> lines) throws IOException {
        try (BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            for (String line : lines) {
                w.write(line);
                w.write('\n');
            }
        }
    }

    /** A text inside a JSON string. */
    static String quoted(String text) {
        return text.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    static long peakKiB() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (Exception ignored) {
        }
        return -1;
    }
}
