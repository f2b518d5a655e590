// HayaKoe's page: speak with streamed audio, show how a text is read, list
// the voices and edit the user dictionary. Plain script, no build step; every
// URL is relative so the page works under Home Assistant's ingress prefix.
"use strict";

(() => {
  const STRINGS = {
    en: {
      speakTitle: "Speak",
      textLabel: "Text",
      voiceLabel: "Voice",
      styleLabel: "Style",
      styleWeightLabel: "Style weight",
      speedLabel: "Speed",
      speedHint: "1 / length scale: 2 is twice as fast, 0.5 half as fast",
      noiseLabel: "Voice variation",
      noiseWLabel: "Rhythm variation",
      sdpLabel: "Random durations (SDP ratio)",
      speakButton: "Speak",
      stopButton: "Stop",
      readButton: "Show reading",
      downloadButton: "Download WAV",
      resetButton: "Reset settings",
      readingTitle: "How it will be read",
      readingEmpty: "Press “Show reading” to see the text after the rewrite, its sentences with their pauses, and the pitch of every accent phrase.",
      legendTitle: "Legend",
      legendHigh: "line above: high pitch",
      legendLow: "no line: low pitch",
      legendDrop: "the pitch falls after this mora (accent nucleus); a phrase without it is flat",
      legendPause: "predicted pause after the sentence",
      voicesTitle: "Voices",
      dictionaryTitle: "User dictionary",
      dictionaryHint: "Your own readings for names the voice gets wrong. Saving applies them at once: the next request, from here or from Home Assistant, reads the new way.",
      dictionaryEmpty: "No entries yet.",
      dictionaryFields: "Word: Latin letters or Japanese. Reading: katakana or hiragana. Accent: the mora after which the pitch falls (0 = flat, empty = estimated). Priority: 1–10 (empty = 5), how strongly the entry wins.",
      surfaceHeader: "Word",
      readingHeader: "Reading",
      accentHeader: "Accent",
      priorityHeader: "Priority",
      actionsHeader: "Actions",
      addButton: "Add word",
      saveButton: "Save",
      tryButton: "Try",
      deleteButton: "Delete",
      characters: "{count} / {max} characters",
      waiting: "Waiting for the first audio…",
      playing: "Playing… first audio after {first} s",
      done: "First audio after {first} s · real-time factor {rtf}× ({audio} s of audio in {wall} s)",
      stopped: "Stopped after {audio} s of audio.",
      cutShort: "The audio ended early: {message}",
      noAudio: "The server sent no audio.",
      noRate: "The server did not say the sample rate.",
      noStreaming: "This browser cannot play streamed audio (no ReadableStream or Web Audio).",
      loadFailed: "Could not load the server's information: {message}",
      requestFailed: "Request failed (HTTP {status}).",
      network: "Could not reach the server: {message}",
      rewritten: "After the rewrite",
      sentences: "Sentences",
      pause: "pause {seconds} s",
      pauseEnd: "end",
      accentOf: "accent {accent}",
      flat: "flat",
      noSentences: "Nothing to read aloud.",
      styles: "Styles",
      licence: "Licence",
      by: "Voice by",
      sampleRate: "{rate} Hz",
      playSample: "Play a sample of {voice} in the style {style}",
      homeAssistantName: "In Home Assistant: {name}",
      defaultStyle: "default",
      sampleText: "こんにちは。今日もいい天気ですね。",
      defaultText: "こんにちは。今日の最高気温は23.5°Cです。",
      defaultVoice: "default",
      dictionaryPath: "File: {path}",
      dictionaryOff: "No dictionary file is configured, so the dictionary cannot be edited here. Start the server with --dictionary FILE (in the add-on: the dictionary option, or a writable /share/hayakoe/ folder).",
      dictionaryReadOnly: "The dictionary file {path} is not writable, so it cannot be edited here.",
      saved: "Saved {count} words. The next request reads the new way.",
      fixFields: "Some fields need a fix; see the messages next to them.",
      notNumber: "Not a whole number.",
      tryReading: "Read as: {reading}",
      row: "row {n}",
    },
    ja: {
      speakTitle: "読み上げ",
      textLabel: "テキスト",
      voiceLabel: "音声",
      styleLabel: "スタイル",
      styleWeightLabel: "スタイルの強さ",
      speedLabel: "話速",
      speedHint: "length scale の逆数：2 で 2 倍速、0.5 で半分の速さ",
      noiseLabel: "声のゆらぎ",
      noiseWLabel: "リズムのゆらぎ",
      sdpLabel: "長さのランダムさ（SDP 比）",
      speakButton: "再生",
      stopButton: "停止",
      readButton: "読み方を表示",
      downloadButton: "WAV をダウンロード",
      resetButton: "設定を戻す",
      readingTitle: "読み方",
      readingEmpty: "「読み方を表示」を押すと、書き換え後のテキスト、文の区切りと予測されるポーズ、アクセント句ごとの高低が表示されます。",
      legendTitle: "凡例",
      legendHigh: "上線：高く発音",
      legendLow: "線なし：低く発音",
      legendDrop: "このモーラの後で下がる（アクセント核）。印のない句は平板",
      legendPause: "文の後の予測ポーズ",
      voicesTitle: "音声一覧",
      dictionaryTitle: "ユーザー辞書",
      dictionaryHint: "誤読される名前の読みを登録します。保存するとすぐに反映され、このページからも Home Assistant からも次のリクエストから新しい読みになります。",
      dictionaryEmpty: "まだ登録がありません。",
      dictionaryFields: "単語：英字のみ、または日本語のみ。読み：カタカナかひらがな。アクセント：下がる直前のモーラ番号（0 = 平板、空欄 = 推定）。優先度：1〜10（空欄 = 5）。",
      surfaceHeader: "単語",
      readingHeader: "読み",
      accentHeader: "アクセント",
      priorityHeader: "優先度",
      actionsHeader: "操作",
      addButton: "単語を追加",
      saveButton: "保存",
      tryButton: "試聴",
      deleteButton: "削除",
      characters: "{count} / {max} 文字",
      waiting: "最初の音声を待っています…",
      playing: "再生中… 最初の音声まで {first} 秒",
      done: "最初の音声まで {first} 秒 · 実時間比 {rtf}×（{wall} 秒で {audio} 秒分の音声）",
      stopped: "{audio} 秒分で停止しました。",
      cutShort: "音声が途中で終わりました：{message}",
      noAudio: "サーバーから音声が届きませんでした。",
      noRate: "サーバーがサンプルレートを返しませんでした。",
      noStreaming: "このブラウザーはストリーミング再生に対応していません（ReadableStream または Web Audio がありません）。",
      loadFailed: "サーバーの情報を読み込めませんでした：{message}",
      requestFailed: "リクエストが失敗しました（HTTP {status}）。",
      network: "サーバーに接続できません：{message}",
      rewritten: "書き換え後",
      sentences: "文",
      pause: "ポーズ {seconds} 秒",
      pauseEnd: "終わり",
      accentOf: "アクセント {accent}",
      flat: "平板",
      noSentences: "読み上げる内容がありません。",
      styles: "スタイル",
      licence: "ライセンス",
      by: "提供",
      sampleRate: "{rate} Hz",
      playSample: "{voice} の {style} のサンプルを再生",
      homeAssistantName: "Home Assistant での名前: {name}",
      defaultStyle: "既定",
      sampleText: "こんにちは。今日もいい天気ですね。",
      defaultText: "こんにちは。今日の最高気温は23.5°Cです。",
      defaultVoice: "既定",
      dictionaryPath: "ファイル：{path}",
      dictionaryOff: "辞書ファイルが設定されていないため、ここでは編集できません。サーバーを --dictionary FILE 付きで起動してください（アドオンでは dictionary オプション、または書き込み可能な /share/hayakoe/ フォルダー）。",
      dictionaryReadOnly: "辞書ファイル {path} に書き込めないため、ここでは編集できません。",
      saved: "{count} 語を保存しました。次のリクエストから新しい読みになります。",
      fixFields: "修正が必要な項目があります。各項目の横のメッセージを見てください。",
      notNumber: "整数ではありません。",
      tryReading: "読み：{reading}",
      row: "{n} 行目",
    },
  };
  const LANG = (navigator.languages?.[0] || navigator.language || "en").toLowerCase().startsWith("ja") ? "ja" : "en";
  const FIELDS = ["surface", "reading", "accent", "priority"];
  const SETTINGS = ["style_weight", "noise_scale", "noise_w_scale", "sdp_ratio"];

  const $ = (id) => document.getElementById(id);

  function t(key, vars = {}) {
    const text = STRINGS[LANG][key] ?? STRINGS.en[key] ?? key;
    return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
  }

  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    }
    node.append(...children);
    return node;
  }

  const seconds = (value) => value.toFixed(2);

  /** An answer of the API that is not a success, with the server's own message when it sent one. */
  class ApiError extends Error {
    constructor(status, body) {
      const detail = body?.error;
      super(detail?.message || (body?.errors ? t("fixFields") : t("requestFailed", { status })));
      this.status = status;
      this.field = detail?.field ?? null;
      this.fieldErrors = Array.isArray(body?.errors) ? body.errors : [];
    }
  }

  async function request(path, method = "GET", body = undefined, signal = undefined) {
    const options = { method, signal, headers: {} };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, options);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new Error(t("network", { message: error.message }));
    }
    if (!response.ok) {
      throw new ApiError(response.status, await response.json().catch(() => null));
    }
    return response;
  }

  const getJson = async (path) => (await request(path)).json();

  // -- streamed playback ----------------------------------------------------

  /**
   * Plays one streamed PCM answer (s16le mono) while it arrives: every piece
   * becomes an AudioBuffer scheduled right after the previous one. What was
   * played is kept for the WAV download and exposed on `window` for tests.
   */
  class Player {
    constructor() {
      this.context = null;
      this.session = null; // the playback running now, if any
      this.latest = null; // the playback started last, running or not
      this.wavUrl = null;
    }

    supported() {
      return typeof ReadableStream !== "undefined" && typeof AudioContext !== "undefined";
    }

    playing() {
      return this.session !== null;
    }

    stop() {
      if (!this.session) return;
      this.session.controller.abort();
      for (const source of this.session.sources) {
        try {
          source.stop();
        } catch {
          // not started yet or already ended
        }
      }
    }

    /** The context for `rate`, made (or resumed) without waiting, so a click's user activation still counts. */
    contextAt(rate) {
      if (!this.context || this.context.sampleRate !== rate) {
        this.context?.close();
        this.context = new AudioContext({ sampleRate: rate, latencyHint: "playback" });
      }
      if (this.context.state === "suspended") this.context.resume();
      return this.context;
    }

    /**
     * POSTs `body` to `path` and plays the answer; `report` hears about progress.
     * `expectedRate` (the voice's) lets the audio context start within the click.
     */
    async play(path, body, report, expectedRate) {
      this.stop();
      const session = { controller: new AbortController(), sources: [], pcm: [], played: [], samples: 0 };
      this.session = session;
      this.latest = session;
      window.hayakoeLastAudio = null;
      const started = performance.now();
      let context = this.contextAt(expectedRate);
      let firstAudio = null;
      let outcome = "done";
      let problem = "";
      report("waiting");
      try {
        const response = await request(path, "POST", body, session.controller.signal);
        const rate = Number(response.headers.get("X-Sample-Rate"));
        if (!(rate > 0)) throw new Error(t("noRate"));
        report("headers", { response });
        if (rate !== context.sampleRate) context = this.contextAt(rate);
        let next = 0;
        let odd = null;
        const reader = response.body.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          const [pcm, rest] = int16Samples(odd, value);
          odd = rest;
          if (pcm.length === 0) continue;
          const buffer = context.createBuffer(1, pcm.length, rate);
          const channel = buffer.getChannelData(0);
          for (let i = 0; i < pcm.length; i++) channel[i] = pcm[i] / 32768;
          const source = context.createBufferSource();
          source.buffer = buffer;
          source.connect(context.destination);
          const when = Math.max(next, context.currentTime + 0.05);
          source.start(when);
          next = when + buffer.duration;
          session.sources.push(source);
          session.pcm.push(pcm);
          session.played.push(channel);
          session.samples += pcm.length;
          if (firstAudio === null) {
            firstAudio = (performance.now() - started) / 1000;
            report("playing", { first: seconds(firstAudio) });
          }
        }
      } catch (error) {
        if (error.name === "AbortError") outcome = "stopped";
        else if (session.samples > 0) [outcome, problem] = ["cut", error.message];
        else throw error;
      } finally {
        if (this.session === session) this.session = null;
      }
      // A newer playback took over (and stopped this one): it owns the page's audio now.
      if (this.latest !== session) return;
      const wall = (performance.now() - started) / 1000;
      const rate = context.sampleRate;
      const audio = session.samples / rate;
      const realTimeFactor = audio / wall;
      window.hayakoeLastAudio = {
        sampleRate: rate,
        samples: joined(session.played, session.samples),
        complete: outcome === "done",
        firstAudioSeconds: firstAudio,
        realTimeFactor,
      };
      this.offerWav(session.pcm, session.samples, rate);
      if (outcome === "done" && session.samples === 0) throw new Error(t("noAudio"));
      report(outcome, {
        first: firstAudio === null ? "–" : seconds(firstAudio),
        rtf: realTimeFactor.toFixed(2),
        audio: seconds(audio),
        wall: seconds(wall),
        message: problem,
      });
    }

    offerWav(pcm, samples, rate) {
      const link = $("download");
      if (this.wavUrl) URL.revokeObjectURL(this.wavUrl);
      this.wavUrl = null;
      link.hidden = samples === 0;
      if (samples === 0) return;
      this.wavUrl = URL.createObjectURL(wavBlob(pcm, samples, rate));
      link.href = this.wavUrl;
    }
  }

  /** Little-endian 16-bit samples from a network chunk; an odd last byte is carried to the next chunk. */
  function int16Samples(carried, bytes) {
    let data = bytes;
    if (carried !== null) {
      data = new Uint8Array(bytes.length + 1);
      data[0] = carried;
      data.set(bytes, 1);
    }
    const count = data.length >> 1;
    const view = new DataView(data.buffer, data.byteOffset, count * 2);
    const pcm = new Int16Array(count);
    for (let i = 0; i < count; i++) pcm[i] = view.getInt16(i * 2, true);
    return [pcm, data.length % 2 ? data[data.length - 1] : null];
  }

  /** The samples handed to Web Audio, in one array (for tests, see `window.hayakoeLastAudio`). */
  function joined(pieces, total) {
    const out = new Float32Array(total);
    let at = 0;
    for (const piece of pieces) {
      out.set(piece, at);
      at += piece.length;
    }
    return out;
  }

  function wavBlob(pieces, samples, rate) {
    const header = new DataView(new ArrayBuffer(44));
    const ascii = (offset, text) => [...text].forEach((c, i) => header.setUint8(offset + i, c.charCodeAt(0)));
    ascii(0, "RIFF");
    header.setUint32(4, 36 + samples * 2, true);
    ascii(8, "WAVE");
    ascii(12, "fmt ");
    header.setUint32(16, 16, true);
    header.setUint16(20, 1, true); // PCM
    header.setUint16(22, 1, true); // mono
    header.setUint32(24, rate, true);
    header.setUint32(28, rate * 2, true);
    header.setUint16(32, 2, true);
    header.setUint16(34, 16, true);
    ascii(36, "data");
    header.setUint32(40, samples * 2, true);
    // Int16Array is little-endian on every platform browsers run on.
    return new Blob([header, ...pieces], { type: "audio/wav" });
  }

  const player = new Player();

  /** Shows a playback's progress in a status line and its errors in an error line. */
  function reporter(statusLine, errorLine, extra = () => {}) {
    return (state, vars = {}) => {
      if (state === "headers") return extra(vars.response);
      errorLine.textContent = state === "cut" ? t("cutShort", vars) : "";
      statusLine.textContent = state === "cut" ? t("stopped", vars) : t(state, vars);
      $("stop").disabled = !player.playing();
    };
  }

  async function playInto(path, body, statusLine, errorLine, extra) {
    if (!player.supported()) {
      errorLine.textContent = t("noStreaming");
      return;
    }
    try {
      await player.play(path, body, reporter(statusLine, errorLine, extra), voiceByName(body.voice).sample_rate);
    } catch (error) {
      statusLine.textContent = "";
      errorLine.textContent = error.message;
      $("stop").disabled = !player.playing();
      throw error;
    }
  }

  // -- speak form ---------------------------------------------------------

  let info = null;

  function voiceByName(name) {
    return info.voices.find((voice) => voice.name === name) ?? info.voices[0];
  }

  function fillStyles() {
    const voice = voiceByName($("voice").value);
    const select = $("style");
    select.replaceChildren(...voice.styles.map((style) => element("option", { value: style, text: style })));
    select.value = voice.default_style;
  }

  /** Speed is shown as 1 / length_scale on a log2 scale, so 1× sits in the middle and both ends are reachable. */
  function setUpSettings() {
    for (const name of SETTINGS) {
      const range = info.settings[name];
      const input = $(name);
      Object.assign(input, { min: range.min, max: range.max, step: niceStep(range.max - range.min) });
    }
    const length = info.settings.length_scale;
    Object.assign($("speed"), { min: -Math.log2(length.max), max: -Math.log2(length.min), step: 0.01 });
    for (const input of document.querySelectorAll(".range input")) {
      input.addEventListener("input", () => showValue(input));
    }
    resetSettings();
  }

  function niceStep(span) {
    return span <= 1 ? 0.01 : 0.05;
  }

  function resetSettings() {
    for (const name of SETTINGS) $(name).value = info.settings[name].default;
    $("speed").value = -Math.log2(info.settings.length_scale.default);
    for (const input of document.querySelectorAll(".range input")) showValue(input);
  }

  function showValue(input) {
    const output = input.parentElement.querySelector("output");
    output.textContent = input.id === "speed" ? `${speed().toFixed(2)}×` : Number(input.value).toFixed(2);
  }

  const speed = () => 2 ** Number($("speed").value);

  function lengthScale() {
    const { min, max } = info.settings.length_scale;
    return Math.min(max, Math.max(min, Number((1 / speed()).toFixed(3))));
  }

  function speakBody(text) {
    const body = { text, voice: $("voice").value, style: $("style").value, length_scale: lengthScale() };
    for (const name of SETTINGS) body[name] = Number($(name).value);
    return body;
  }

  function showCount() {
    $("text-count").textContent = t("characters", { count: $("text").value.length, max: info.max_text_length });
  }

  async function speak(event) {
    event.preventDefault();
    $("speak").disabled = true;
    try {
      await playInto("api/speak", speakBody($("text").value), $("speak-status"), $("speak-error"));
    } catch (error) {
      const field = error.field === "length_scale" ? "speed" : error.field;
      if (field && $(field)) $(field).setAttribute("aria-invalid", "true");
    } finally {
      $("speak").disabled = false;
    }
  }

  // -- reading --------------------------------------------------------------

  let lastReading = null;

  async function showReading() {
    const text = $("text").value;
    $("reading-error").textContent = "";
    $("read").disabled = true;
    try {
      const response = await request("api/reading", "POST", { text, voice: $("voice").value });
      renderReading(await response.json());
      lastReading = text;
    } catch (error) {
      $("reading-error").textContent = error.message;
    } finally {
      $("read").disabled = false;
    }
  }

  function renderReading(reading) {
    const container = $("reading");
    const rewritten = element(
      "p",
      { class: "rewritten" },
      element("span", { class: "label", text: t("rewritten") }),
      element("span", { lang: "ja", text: reading.rewritten }),
    );
    if (reading.sentences.length === 0) {
      container.replaceChildren(rewritten, element("p", { class: "hint", text: t("noSentences") }));
      return;
    }
    const list = element("ol", { class: "sentences", "aria-label": t("sentences") });
    for (const sentence of reading.sentences) {
      const phrases = element("p", { class: "phrases", lang: "ja" });
      for (const phrase of sentence.phrases) phrases.append(renderPhrase(phrase), " ");
      const pause =
        sentence.pause_after === null
          ? element("span", { class: "pause end", text: t("pauseEnd") })
          : element("span", { class: "pause", text: t("pause", { seconds: seconds(sentence.pause_after) }) });
      list.append(
        element("li", { class: "sentence" }, element("p", { class: "sentence-text", lang: "ja", text: sentence.text }), phrases, pause),
      );
    }
    container.replaceChildren(rewritten, list);
  }

  function renderPhrase(phrase) {
    const description = phrase.accent === 0 ? t("flat") : t("accentOf", { accent: phrase.accent });
    const node = element("span", { class: "phrase", title: description, "data-accent": String(phrase.accent) });
    phrase.morae.forEach((mora, index) => {
      node.append(element("span", { class: mora.high ? "mora high" : "mora", text: mora.kana }));
      if (index + 1 === phrase.accent) node.append(element("span", { class: "drop", "aria-hidden": "true", text: "ꜜ" }));
    });
    node.append(element("span", { class: "visually-hidden", text: ` (${description})` }));
    return node;
  }

  // -- voices -----------------------------------------------------------------

  function renderVoices() {
    const status = element("p", { class: "status", "aria-live": "polite" });
    const error = element("p", { class: "error-text", "aria-live": "assertive" });
    const items = info.voices.map((voice) => {
      const styles = element("ul", { class: "styles", "aria-label": t("styles") });
      for (const style of voice.styles) {
        // The name Home Assistant's voice list gives this voice and style (the plain name: the default style).
        const entry = voice.home_assistant.find((item) => item.style === style);
        const button = element(
          "button",
          {
            type: "button",
            class: "play",
            title: t("homeAssistantName", { name: entry.name }),
            "aria-label": t("playSample", { voice: voice.name, style }),
          },
          element("span", { "aria-hidden": "true", text: "▶ " }),
          style === voice.default_style ? `${style} (${t("defaultStyle")})` : style,
        );
        button.addEventListener("click", () =>
          playInto("api/speak", { text: t("sampleText"), voice: voice.name, style }, status, error).catch(() => {}),
        );
        styles.append(element("li", {}, button));
      }
      const attribution = voice.attribution?.url
        ? element("a", { href: voice.attribution.url, target: "_blank", rel: "noopener noreferrer", text: voice.attribution.name })
        : element("span", { text: voice.attribution?.name ?? "" });
      const details = element(
        "p",
        { class: "secondary" },
        `${t("licence")}: ${voice.license || "–"} · ${t("by")} `,
        attribution,
        ` · ${t("sampleRate", { rate: voice.sample_rate })}`,
      );
      const title = voice.name === info.default_voice ? `${voice.name} (${t("defaultVoice")})` : voice.name;
      return element("li", { class: "voice" }, element("h3", { text: title }), details, styles);
    });
    $("voices").replaceChildren(...items);
    $("voices").after(status, error);
  }

  // -- dictionary ---------------------------------------------------------------

  let dictionaryWritable = false;

  async function loadDictionary() {
    const state = await getJson("api/dictionary");
    renderDictionary(state);
  }

  function renderDictionary(state) {
    dictionaryWritable = state.writable;
    $("dictionary-path").textContent = state.path ? t("dictionaryPath", { path: state.path }) : "";
    const notice = $("dictionary-disabled");
    notice.hidden = state.writable;
    notice.textContent = state.path ? t("dictionaryReadOnly", { path: state.path }) : t("dictionaryOff");
    $("entries").replaceChildren();
    state.entries.forEach((entry) => addRow(entry));
    for (const button of [$("add-entry"), $("save-dictionary")]) button.disabled = !state.writable;
    updateEmpty();
  }

  function updateEmpty() {
    $("dictionary-empty").hidden = $("entries").rows.length > 0;
  }

  let rowIds = 0;

  function addRow(entry = { surface: "", reading: "", accent: null, priority: 5 }) {
    const row = $("entry-row").content.firstElementChild.cloneNode(true);
    const id = ++rowIds;
    for (const name of FIELDS) {
      const input = row.querySelector(`input[name="${name}"]`);
      input.parentElement.dataset.label = t(`${name}Header`);
      const message = input.nextElementSibling;
      message.id = `entry-${id}-${name}-error`;
      input.setAttribute("aria-describedby", message.id);
      input.value = entry[name] ?? "";
      input.disabled = !dictionaryWritable;
      input.addEventListener("input", () => setFieldError(row, name, ""));
    }
    if (!entry.priority) row.querySelector('input[name="priority"]').placeholder = "5";
    row.querySelector('input[name="accent"]').placeholder = "–";
    translate(row);
    row.querySelector(".try").addEventListener("click", () => tryRow(row));
    const remove = row.querySelector(".delete");
    remove.disabled = !dictionaryWritable;
    remove.addEventListener("click", () => deleteRow(row));
    $("entries").append(row);
    labelRows();
    updateEmpty();
    return row;
  }

  /** Each input is labelled with its column and row, since a table cell has no label of its own. */
  function labelRows() {
    [...$("entries").rows].forEach((row, index) => {
      const n = t("row", { n: index + 1 });
      for (const name of FIELDS) {
        row.querySelector(`input[name="${name}"]`).setAttribute("aria-label", `${t(`${name}Header`)}, ${n}`);
      }
      row.querySelector(".try").setAttribute("aria-label", `${t("tryButton")}, ${n}`);
      row.querySelector(".delete").setAttribute("aria-label", `${t("deleteButton")}, ${n}`);
    });
  }

  function deleteRow(row) {
    const next = row.nextElementSibling ?? row.previousElementSibling;
    row.remove();
    labelRows();
    updateEmpty();
    (next?.querySelector("input") ?? $("add-entry")).focus();
  }

  function setFieldError(row, field, message) {
    const input = row.querySelector(`input[name="${field}"]`);
    if (!input) return;
    input.nextElementSibling.textContent = message;
    if (message) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }

  /** The row as an entry, or null (with messages shown) when a number field holds no whole number. */
  function rowEntry(row) {
    const value = (name) => row.querySelector(`input[name="${name}"]`);
    let ok = true;
    const number = (name, fallback) => {
      const input = value(name);
      if (input.validity.badInput) {
        setFieldError(row, name, t("notNumber"));
        ok = false;
      }
      return input.value.trim() === "" ? fallback : Number(input.value);
    };
    const entry = {
      surface: value("surface").value.trim(),
      reading: value("reading").value.trim(),
      accent: number("accent", null),
      priority: number("priority", 5),
    };
    return ok ? entry : null;
  }

  function showFieldErrors(rows, errors) {
    for (const error of errors) {
      const row = rows[error.index ?? 0];
      if (row) setFieldError(row, error.field, error.message);
    }
    const first = rows.flatMap((row) => [...row.querySelectorAll('input[aria-invalid="true"]')])[0];
    first?.focus();
  }

  async function saveDictionary(event) {
    event.preventDefault();
    const rows = [...$("entries").rows];
    $("dictionary-status").textContent = "";
    $("dictionary-error").textContent = "";
    for (const row of rows) FIELDS.forEach((name) => setFieldError(row, name, ""));
    const entries = rows.map(rowEntry);
    if (entries.includes(null)) {
      $("dictionary-error").textContent = t("fixFields");
      return;
    }
    $("save-dictionary").disabled = true;
    try {
      const response = await request("api/dictionary", "PUT", { entries });
      const state = await response.json();
      renderDictionary(state);
      $("dictionary-status").textContent = t("saved", { count: state.entries.length });
      if (lastReading !== null && lastReading === $("text").value) await showReading();
    } catch (error) {
      $("dictionary-error").textContent = error.message;
      showFieldErrors(rows, error.fieldErrors ?? []);
    } finally {
      $("save-dictionary").disabled = !dictionaryWritable;
    }
  }

  async function tryRow(row) {
    FIELDS.forEach((name) => setFieldError(row, name, ""));
    $("dictionary-error").textContent = "";
    const shown = row.querySelector(".try-reading");
    shown.textContent = "";
    const entry = rowEntry(row);
    if (entry === null) return;
    const body = { entry, voice: $("voice").value, style: $("style").value };
    const showHeader = (response) => {
      const reading = response.headers.get("X-Reading");
      if (reading) shown.textContent = t("tryReading", { reading: decodeURIComponent(reading) });
    };
    try {
      await playInto("api/dictionary/try", body, $("dictionary-status"), $("dictionary-error"), showHeader);
    } catch (error) {
      showFieldErrors([row], (error.fieldErrors ?? []).map((e) => ({ ...e, index: 0 })));
      if (error.field) setFieldError(row, error.field, error.message);
    }
  }

  // -- start ------------------------------------------------------------------

  function translate(root) {
    for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  }

  async function start() {
    document.documentElement.lang = LANG;
    translate(document);
    try {
      info = await getJson("api/info");
    } catch (error) {
      const line = $("load-error");
      line.textContent = t("loadFailed", { message: error.message });
      line.hidden = false;
      return;
    }
    $("version").textContent = `v${info.version}`;
    const voices = $("voice");
    voices.replaceChildren(...info.voices.map((voice) => element("option", { value: voice.name, text: voice.name })));
    voices.value = info.default_voice;
    voices.addEventListener("change", fillStyles);
    fillStyles();
    setUpSettings();
    const text = $("text");
    text.maxLength = info.max_text_length;
    text.value = t("defaultText");
    text.addEventListener("input", showCount);
    for (const input of document.querySelectorAll("#speak-form [id]")) {
      input.addEventListener("input", () => input.removeAttribute("aria-invalid"));
    }
    showCount();
    renderVoices();
    $("speak-form").addEventListener("submit", speak);
    $("stop").addEventListener("click", () => player.stop());
    $("read").addEventListener("click", showReading);
    $("reset").addEventListener("click", resetSettings);
    $("add-entry").addEventListener("click", () => addRow().querySelector("input").focus());
    $("dictionary-form").addEventListener("submit", saveDictionary);
    try {
      await loadDictionary();
    } catch (error) {
      $("dictionary-error").textContent = error.message;
    }
    document.body.dataset.ready = "true";
  }

  start();
})();
