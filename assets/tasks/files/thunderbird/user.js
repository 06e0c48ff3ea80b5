// The bundled Thunderbird tasks' profile: only Local Folders (no mail account, so no
// network), none of the first-run screens. profiles.ini and installs.ini make it the
// default profile of Debian's Thunderbird (installed in /usr/lib/thunderbird; the section
// name is that folder's hash), so Thunderbird does not create a profile of its own.
user_pref("mail.account.account1.server", "server1");
user_pref("mail.accountmanager.accounts", "account1");
user_pref("mail.accountmanager.localfoldersserver", "server1");
user_pref("mail.server.server1.hostname", "Local Folders");
user_pref("mail.server.server1.name", "Local Folders");
user_pref("mail.server.server1.type", "none");
user_pref("mail.server.server1.userName", "nobody");
user_pref("mail.server.server1.directory-rel", "[ProfD]Mail/Local Folders");
user_pref("mail.provider.suppress_dialog_on_startup", true);
user_pref("mail.shell.checkDefaultClient", false);
user_pref("mailnews.start_page.enabled", false);
user_pref("mail.rights.version", 1);
user_pref("mail.startup.enabledMailCheckOnce", true);
user_pref("mail.inappnotifications.enabled", false);
user_pref("mailnews.auto_config.fetchFromISP.enabled", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("app.update.auto", false);
user_pref("extensions.update.enabled", false);
