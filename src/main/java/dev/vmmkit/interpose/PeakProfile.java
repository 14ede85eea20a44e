package dev.vmmkit.interpose;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;

import java.io.IOException;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;

/**
 * The peak profile file: what one run of a program needed on each device, read by the next run of
 * the same program to size its allocator's budget from the start. Small and versioned:
 * <pre>
 * {"format":"vmmkit-peak-profile","version":1,"saved_at":"2026-11-23T15:40:00Z",
 *  "program":{"executable":"/usr/bin/python3.12","arguments":["train.py","--batch","32"],"directory":"/home/me/proj",
 *             "environment":["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]},
 *  "devices":[{"device":0,"peak_live_bytes":N,"peak_reserved_bytes":N,"allocs":N}]}
 * </pre>
 * Jackson's streaming parser reads it (not the object mapper: this runs on a program's first CUDA
 * call, where every class loaded counts). Keys it does not know are skipped, so a later minor
 * addition still reads; another {@code version} does not.
 *
 * @param savedAt when the run that wrote it ended (ISO-8601, for people; never compared)
 * @param program the program that wrote it
 * @param devices one entry per device the run allocated on, in device order
 */
record PeakProfile(String savedAt, ProgramIdentity program, List<DeviceFigures> devices) {
    static final String FORMAT = "vmmkit-peak-profile";
    static final int VERSION = 1;
    private static final JsonFactory JSON = new JsonFactory();

    /** What one device needed in the run. */
    record DeviceFigures(int device, long peakLiveBytes, long peakReservedBytes, long allocations) {
    }

    PeakProfile {
        devices = List.copyOf(devices);
    }

    /** The entry of {@code device}, or null. */
    DeviceFigures device(int device) {
        for (DeviceFigures d : devices) if (d.device() == device) return d;
        return null;
    }

    /** This profile with {@code fresh}'s devices replacing its own of the same number (others kept), and fresh's time and program. */
    PeakProfile updatedWith(PeakProfile fresh) {
        List<DeviceFigures> merged = new ArrayList<>(fresh.devices());
        for (DeviceFigures old : devices) if (fresh.device(old.device()) == null) merged.add(old);
        merged.sort((a, b) -> Integer.compare(a.device(), b.device()));
        return new PeakProfile(fresh.savedAt(), fresh.program(), merged);
    }

    String toJson() {
        StringWriter text = new StringWriter();
        try (JsonGenerator out = JSON.createGenerator(text)) {
            out.writeStartObject();
            out.writeStringField("format", FORMAT);
            out.writeNumberField("version", VERSION);
            out.writeStringField("saved_at", savedAt);
            out.writeObjectFieldStart("program");
            out.writeStringField("executable", program.executable());
            out.writeArrayFieldStart("arguments");
            for (String argument : program.arguments()) out.writeString(argument);
            out.writeEndArray();
            out.writeStringField("directory", program.directory());
            out.writeArrayFieldStart("environment");
            for (String variable : program.environment()) out.writeString(variable);
            out.writeEndArray();
            out.writeEndObject();
            out.writeArrayFieldStart("devices");
            for (DeviceFigures d : devices) {
                out.writeStartObject();
                out.writeNumberField("device", d.device());
                out.writeNumberField("peak_live_bytes", d.peakLiveBytes());
                out.writeNumberField("peak_reserved_bytes", d.peakReservedBytes());
                out.writeNumberField("allocs", d.allocations());
                out.writeEndObject();
            }
            out.writeEndArray();
            out.writeEndObject();
        } catch (IOException e) {
            throw new IllegalStateException("writing to a string cannot fail", e);
        }
        return text + "\n";
    }

    /**
     * Reads a profile file's text.
     *
     * @throws IOException naming what is wrong: not JSON (a truncated or corrupt file), not a
     *                     profile, another version, a figure out of range
     */
    static PeakProfile parse(String text) throws IOException {
        try (JsonParser in = JSON.createParser(text)) {
            expect(in.nextToken() == JsonToken.START_OBJECT, "not a JSON object");
            String format = null, savedAt = "";
            int version = -1;
            ProgramIdentity program = null;
            List<DeviceFigures> devices = null;
            while (in.nextToken() == JsonToken.FIELD_NAME) {
                String key = in.currentName();
                JsonToken value = in.nextToken();
                switch (key) {
                    case "format" -> format = in.getValueAsString();
                    case "version" -> version = value == JsonToken.VALUE_NUMBER_INT ? in.getIntValue() : -1;
                    case "saved_at" -> savedAt = in.getValueAsString("");
                    case "program" -> program = program(in);
                    case "devices" -> devices = devices(in);
                    default -> in.skipChildren();
                }
            }
            expect(in.currentToken() == JsonToken.END_OBJECT && in.nextToken() == null, "text after the object");
            expect(FORMAT.equals(format), "not a vmmkit peak profile (format " + format + ")");
            expect(version == VERSION, "version " + version + ", this vmmkit reads version " + VERSION);
            expect(program != null && devices != null, "no program or no devices");
            return new PeakProfile(savedAt, program, devices);
        } catch (com.fasterxml.jackson.core.JacksonException e) {
            throw new IOException("not valid JSON (" + e.getOriginalMessage() + ")", e);
        }
    }

    private static ProgramIdentity program(JsonParser in) throws IOException {
        expect(in.currentToken() == JsonToken.START_OBJECT, "program is not an object");
        String executable = null, directory = null;
        List<String> arguments = null, environment = List.of();
        while (in.nextToken() == JsonToken.FIELD_NAME) {
            String key = in.currentName();
            in.nextToken();
            switch (key) {
                case "executable" -> executable = in.getValueAsString();
                case "directory" -> directory = in.getValueAsString();
                case "arguments" -> arguments = strings(in, "program.arguments");
                case "environment" -> environment = strings(in, "program.environment");
                default -> in.skipChildren();
            }
        }
        expect(executable != null && directory != null && arguments != null, "program lacks a field");
        return new ProgramIdentity(executable, arguments, directory, environment);
    }

    private static List<String> strings(JsonParser in, String what) throws IOException {
        expect(in.currentToken() == JsonToken.START_ARRAY, what + " is not an array");
        List<String> strings = new ArrayList<>();
        while (in.nextToken() == JsonToken.VALUE_STRING) strings.add(in.getText());
        expect(in.currentToken() == JsonToken.END_ARRAY, what + " holds a non-string");
        return strings;
    }

    private static List<DeviceFigures> devices(JsonParser in) throws IOException {
        expect(in.currentToken() == JsonToken.START_ARRAY, "devices is not an array");
        List<DeviceFigures> devices = new ArrayList<>();
        while (in.nextToken() == JsonToken.START_OBJECT) {
            long device = -1, peakLive = -1, peakReserved = 0, allocations = 0;
            while (in.nextToken() == JsonToken.FIELD_NAME) {
                String key = in.currentName();
                JsonToken value = in.nextToken();
                long number = value == JsonToken.VALUE_NUMBER_INT ? in.getLongValue() : -1;
                switch (key) {
                    case "device" -> device = number;
                    case "peak_live_bytes" -> peakLive = number;
                    case "peak_reserved_bytes" -> peakReserved = number;
                    case "allocs" -> allocations = number;
                    default -> in.skipChildren();
                }
            }
            expect(device >= 0 && device < DeviceManagers.MAX_DEVICES, "a device number out of range: " + device);
            expect(peakLive >= 0 && peakReserved >= 0 && allocations >= 0, "device " + device + ": a figure is missing or negative");
            devices.add(new DeviceFigures((int) device, peakLive, peakReserved, allocations));
        }
        expect(in.currentToken() == JsonToken.END_ARRAY, "devices holds a non-object");
        return devices;
    }

    private static void expect(boolean condition, String problem) throws IOException {
        if (!condition) throw new IOException(problem);
    }
}
